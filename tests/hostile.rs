//! Hostile files for the `miden-gpu` binary: every one must end with an `error:` line and exit
//! status 1 (or, for a change that leaves a valid file, success), never a panic, an abort or a
//! hang.
//!
//! The corpus is made here from one small valid proof, one valid package and one inputs file
//! with every section: flipped bytes at spread offsets, truncations, length prefixes set to 2^40
//! at the three places a decoder reserves memory for them (the top-level proof, a Merkle opening
//! the verifier parses later, the list at the end), and hostile values in the inputs (past the
//! field, too deep, too many). The counts are bounded so the whole file runs in well under a
//! minute on two cores.

#![cfg(feature = "miden")]

mod cli_support;

use std::{
    fs::{self, File},
    process::Output,
    sync::Arc,
    time::{Duration, Instant},
};

use cli_support::{
    arg, assert_error_status, assert_success, miden_gpu, report_value, stderr, TempDir,
};
use miden_assembly::Assembler;
use miden_mast_package::{MastArtifact, Package, PackageKind, PackageManifest};
use miden_prover::ExecutionProof;
use winter_utils::{ByteReader, ByteWriter, Deserializable, Serializable, SliceReader};

// CORPUS
// ================================================================================================

/// The program of the corpus: small, with stack inputs and outputs.
const PROGRAM: &str = "begin push.3 mul add end";

/// Its inputs: `[2, 5]` with 5 on top.
const INPUTS: &str = r#"{ "operand_stack": ["2", "5"] }"#;

/// Offsets of the flipped bytes: this many, spread over the proof.
const FLIPS: usize = 48;

/// Lengths of the truncated files: this many, spread over the file.
const TRUNCATIONS: usize = 16;

/// A declared length no file can hold.
const HUGE_LENGTH: u64 = 1 << 40;

/// A directory with `program.masm`, `program.inputs` and their proof and outputs; returns the
/// program hash.
fn proven_program(dir: &TempDir) -> String {
    let program = arg(&dir.file("program.masm", PROGRAM));
    dir.file("program.inputs", INPUTS);
    let output = miden_gpu(&["prove", &program, "-b", "cpu"]);
    assert_success(&output);
    report_value(&output, "program hash")
}

/// `verify` of the proof file `name` against the program's hash, inputs and outputs.
fn verify(dir: &TempDir, hash: &str, name: &str, bytes: &[u8]) -> Output {
    let proof = arg(&dir.file(name, bytes));
    let (inputs, outputs) = (arg(&dir.path("program.inputs")), arg(&dir.path("program.outputs")));
    miden_gpu(&["verify", "-x", hash, "-p", &proof, "-i", &inputs, "-o", &outputs])
}

/// `offsets` spread evenly over `0..len`, each once.
fn spread(len: usize, count: usize) -> Vec<usize> {
    let mut offsets: Vec<usize> = (0..count).map(|i| i * len / count).collect();
    offsets.dedup();
    offsets
}

/// Winterfell's `usize` encoding of `value`, in its 9-byte form.
fn long_usize(value: u64) -> Vec<u8> {
    let mut bytes = vec![0];
    bytes.extend(value.to_le_bytes());
    bytes
}

/// The encoded `usize` at the start of `bytes`: its value and length.
fn read_usize(bytes: &[u8]) -> (usize, usize) {
    let mut reader = SliceReader::new(bytes);
    let value = reader.read_usize().expect("an encoded usize");
    let length = match bytes[0].trailing_zeros() {
        8 => 9,
        zeros => zeros as usize + 1,
    };
    (value, length)
}

/// `bytes` with `range` replaced by `with`.
fn splice(bytes: &[u8], range: std::ops::Range<usize>, with: &[u8]) -> Vec<u8> {
    [&bytes[..range.start], with, &bytes[range.end..]].concat()
}

/// The valid proof with a length prefix of [`HUGE_LENGTH`] at each place a decoder reserves
/// memory for one: the first trace query's value bytes, the node-vector count of its Merkle
/// opening (parsed by the verifier, not at load time) and the precompile request list at the end.
fn huge_length_proofs(proof: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let decoded = ExecutionProof::from_bytes(proof).expect("the valid proof decodes");
    let stark = decoded.stark_proof();
    let queries = stark.context.to_bytes().len() + 1 + stark.commitments.to_bytes().len();
    let queries_len = stark.trace_queries[0].to_bytes().len();
    assert_eq!(proof[queries..queries + queries_len], stark.trace_queries[0].to_bytes()[..]);

    // the query values' length
    let (_, prefix) = read_usize(&proof[queries..]);
    let values = splice(proof, queries..queries + prefix, &long_usize(HUGE_LENGTH));

    // the opening's node-vector count: [values][opening = depth, count, vectors...]
    let mut reader = SliceReader::new(&proof[queries..queries + queries_len]);
    let value_bytes = Vec::<u8>::read_from(&mut reader).expect("query values");
    let opening = Vec::<u8>::read_from(&mut reader).expect("query opening");
    let (_, count) = read_usize(&opening[1..]);
    let opening = splice(&opening, 1..1 + count, &long_usize(HUGE_LENGTH));
    let mut queries_bytes = Vec::new();
    value_bytes.write_into(&mut queries_bytes);
    queries_bytes.write_usize(opening.len());
    queries_bytes.write_bytes(&opening);
    let node_vectors = splice(proof, queries..queries + queries_len, &queries_bytes);

    // the precompile requests' count, the last byte of a proof without any
    assert_eq!(proof.last(), Some(&1), "a proof without precompile requests ends with 0");
    let requests = splice(proof, proof.len() - 1..proof.len(), &long_usize(HUGE_LENGTH));

    vec![("query values", values), ("opening nodes", node_vectors), ("requests", requests)]
}

// PROOFS
// ================================================================================================

/// A 200 MB file is refused by its size, at once, without reading it.
#[test]
fn verify_refuses_an_oversized_proof_file() {
    let dir = TempDir::new("oversized");
    let path = dir.path("huge.proof");
    File::create(&path).and_then(|file| file.set_len(200 << 20)).expect("a sparse 200 MB file");
    dir.file("huge.outputs", r#"{ "stack": ["0"] }"#);
    let start = Instant::now();
    let output = miden_gpu(&["verify", "-x", &"0".repeat(64), "-p", &arg(&path)]);
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert_error_status(&output, 1, "larger than the limit of 67108864 bytes");
}

/// Flipped bytes, truncations and huge length prefixes in a valid proof: each one an `error:`
/// line and status 1.
#[test]
fn verify_survives_mutated_proofs() {
    let dir = TempDir::new("mutated");
    let hash = proven_program(&dir);
    let proof = fs::read(dir.path("program.proof")).expect("read the proof");
    assert_success(&verify(&dir, &hash, "valid.proof", &proof));

    let mut mutants: Vec<(String, Vec<u8>)> = Vec::new();
    for offset in spread(proof.len(), FLIPS) {
        let mut flipped = proof.clone();
        flipped[offset] ^= 0x5a;
        mutants.push((format!("byte {offset} flipped"), flipped));
    }
    for len in spread(proof.len(), TRUNCATIONS) {
        mutants.push((format!("truncated to {len} bytes"), proof[..len].to_vec()));
    }
    for (place, bytes) in huge_length_proofs(&proof) {
        mutants.push((format!("length 2^40 at the {place}"), bytes));
    }
    for (what, bytes) in mutants {
        let output = verify(&dir, &hash, "mutant.proof", &bytes);
        assert_eq!(output.status.code(), Some(1), "{what}: {}\n{}", output.status, stderr(&output));
        assert_error_status(&output, 1, "error:");
    }
}

/// The huge length prefixes are refused while the proof is read, as a malformed file.
#[test]
fn verify_names_huge_lengths_as_malformed_proofs() {
    let dir = TempDir::new("lengths");
    let hash = proven_program(&dir);
    let proof = fs::read(dir.path("program.proof")).expect("read the proof");
    for (place, bytes) in huge_length_proofs(&proof) {
        let output = verify(&dir, &hash, "huge.proof", &bytes);
        assert!(stderr(&output).contains("invalid proof file"), "{place}:\n{}", stderr(&output));
        assert_error_status(&output, 1, "exceeds");
    }
}

// PACKAGES
// ================================================================================================

/// The program as a `.masp` package.
fn package_bytes() -> Vec<u8> {
    let program = Assembler::default().assemble_program(PROGRAM).expect("program assembles");
    Package {
        name: "program".into(),
        version: None,
        description: None,
        kind: PackageKind::Executable,
        mast: MastArtifact::Executable(Arc::new(program)),
        manifest: PackageManifest::default(),
        sections: Vec::new(),
    }
    .to_bytes()
}

/// A valid package proves; garbage and truncations do not, with an `error:` line.
#[test]
fn prove_survives_hostile_packages() {
    let dir = TempDir::new("packages");
    dir.file("program.inputs", INPUTS);
    let package = package_bytes();
    let valid = arg(&dir.file("program.masp", &package));
    assert_success(&miden_gpu(&["prove", &valid, "-b", "cpu"]));

    let mut mutants: Vec<(String, Vec<u8>)> =
        vec![("garbage".into(), b"not a package at all".to_vec()), ("zeros".into(), vec![0; 4096])];
    for len in spread(package.len(), TRUNCATIONS) {
        mutants.push((format!("truncated to {len} bytes"), package[..len].to_vec()));
    }
    let inputs = arg(&dir.path("program.inputs"));
    for (what, bytes) in mutants {
        let path = dir.file("mutant.masp", &bytes);
        let output = miden_gpu(&["prove", &arg(&path), "-b", "cpu", "-i", &inputs]);
        assert_eq!(output.status.code(), Some(1), "{what}: {}\n{}", output.status, stderr(&output));
        assert_error_status(&output, 1, "invalid program file");
    }
    assert!(!dir.path("mutant.proof").exists());

    // a flip may leave a valid package (a name, an unused byte): success or an `error:` line
    for offset in spread(package.len(), FLIPS) {
        let mut flipped = package.clone();
        flipped[offset] ^= 0x5a;
        let path = dir.file("flipped.masp", &flipped);
        let output = miden_gpu(&["prove", &arg(&path), "-b", "cpu", "-i", &inputs]);
        assert_survived(&output, &format!("package byte {offset} flipped"));
    }
}

/// `output` is a success or an `error:` line with status 1: no panic, abort or signal.
fn assert_survived(output: &Output, what: &str) {
    match output.status.code() {
        Some(0) => {},
        Some(1) => assert_error_status(output, 1, "error:"),
        _ => panic!("{what}: {}\n{}", output.status, stderr(output)),
    }
    assert!(!stderr(output).contains("panicked"), "{what}: {}", stderr(output));
}

// INPUTS FILES
// ================================================================================================

/// The arithmetic test program and its inputs, which have every section of the format: the
/// program reads the operand and advice stacks, and every section is parsed and built into the
/// advice inputs.
const RICH_PROGRAM: &str = include_str!("programs/arith.masm");
const RICH_INPUTS: &str = include_str!("programs/arith.inputs");

/// Flipped bytes, truncations and hostile values in an inputs file: each one a success (a
/// change that leaves valid inputs) or an `error:` line and status 1, within bounded time.
#[test]
fn prove_survives_hostile_inputs() {
    let dir = TempDir::new("inputs");
    let program = arg(&dir.file("program.masm", RICH_PROGRAM));
    let prove = |what: &str, inputs: &[u8]| {
        let path = dir.file("mutant.inputs", inputs);
        let start = Instant::now();
        let output = miden_gpu(&["prove", &program, "-b", "cpu", "-i", &arg(&path)]);
        assert_survived(&output, what);
        assert!(start.elapsed() < Duration::from_secs(60), "{what} took {:?}", start.elapsed());
        output
    };
    assert_success(&prove("valid", RICH_INPUTS.as_bytes()));

    let rich = RICH_INPUTS.as_bytes();
    for offset in spread(rich.len(), FLIPS) {
        let mut flipped = rich.to_vec();
        flipped[offset] ^= 0x5a;
        prove(&format!("byte {offset} flipped"), &flipped);
    }
    for len in spread(rich.len(), TRUNCATIONS) {
        prove(&format!("truncated to {len} bytes"), &rich[..len]);
    }
    let deep = format!("{{ \"operand_stack\": {}{} }}", "[".repeat(100_000), "]".repeat(100_000));
    let long_stack: Vec<String> = (0..17).map(|i| format!("\"{i}\"")).collect();
    let refused = [
        ("a value past 2^64", r#"{ "operand_stack": ["18446744073709551616"] }"#.to_string()),
        ("the field modulus", r#"{ "operand_stack": ["18446744069414584321"] }"#.to_string()),
        ("a negative value", r#"{ "operand_stack": ["-1"] }"#.to_string()),
        ("17 stack inputs", format!("{{ \"operand_stack\": [{}] }}", long_stack.join(", "))),
        ("nesting 100 000 deep", deep),
        ("a digest of 33 bytes", RICH_INPUTS.replace("0x0100", "0x010000")),
        ("a Merkle tree of 3 leaves", {
            let leaf = |byte: u8| format!("\"0x{byte:02x}{}\"", "0".repeat(62));
            let leaves = [leaf(0x14), leaf(0x15), leaf(0x16)].join(", ");
            format!("{{ \"merkle_store\": [{{ \"merkle_tree\": [{leaves}] }}] }}")
        }),
        ("not JSON", "\u{0}\u{ff}\u{fe}".to_string()),
    ];
    for (what, inputs) in refused {
        let output = prove(what, inputs.as_bytes());
        assert_error_status(&output, 1, "invalid inputs file");
        assert!(!stderr(&output).contains("panicked"), "{what}: {}", stderr(&output));
    }
    // a large advice stack is valid: it is read and proved, in bounded time
    let many: Vec<String> = (0..200_000u64).map(|i| format!("\"{i}\"")).collect();
    let large =
        format!("{{ \"operand_stack\": [\"2\", \"5\"], \"advice_stack\": [{}] }}", many.join(","));
    assert_success(&prove("200 000 advice values", large.as_bytes()));
}

/// A package whose last count (its custom sections) is huge is refused: the bounded reader
/// checks the counts that decoders reserve memory for directly.
#[test]
fn prove_refuses_huge_counts_in_packages() {
    let dir = TempDir::new("package-count");
    let package = package_bytes();
    let (count, length) = read_usize(&package[package.len() - 1..]);
    assert_eq!((count, length), (0, 1), "a package without sections ends with 0");
    let bytes = splice(&package, package.len() - 1..package.len(), &long_usize(HUGE_LENGTH));
    let path = dir.file("program.masp", bytes);
    let output = miden_gpu(&["prove", &arg(&path), "-b", "cpu"]);
    assert_error_status(&output, 1, "exceeds");
}
