//! The `miden-gpu` binary: prove and verify round trips on the CPU backend with an inputs file,
//! and a clean error (non-zero exit, a message on stderr, no panic) for each kind of bad input.

#![cfg(feature = "miden")]

mod cli_support;

use std::{fs, path::Path, process::Output};

use cli_support::{
    arg, assert_error, assert_error_status, assert_success, command, miden_gpu, report_value,
    stderr, stdout, TempDir,
};

// FIXTURES
// ================================================================================================

/// Operand stack `[3, 5]` (3 on top), advice stack `[7, 11, 13]` (7 on top): the outputs are
/// `[(5 - 3) * 7 - 11 + 13, (5 - 3) * 7 - 11] = [16, 3]`; another order of either stack gives
/// other outputs.
const PROGRAM: &str = include_str!("programs/arith.masm");

/// The inputs of [`PROGRAM`], with an advice map and Merkle store the program does not read (to
/// parse every section of the format).
const INPUTS: &str = include_str!("programs/arith.inputs");

/// The 16 stack outputs of [`PROGRAM`] on [`INPUTS`].
const OUTPUTS: [u64; 16] = [16, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

// HELPERS
// ================================================================================================

/// Writes [`PROGRAM`] and [`INPUTS`] as `program.masm` and `program.inputs`, proves with
/// `extra` arguments on the CPU backend (default proof and outputs files) and returns the
/// program hash.
fn prove_program(dir: &TempDir, extra: &[&str]) -> String {
    let program = dir.file("program.masm", PROGRAM);
    dir.file("program.inputs", INPUTS);
    let program = arg(&program);
    let mut args = vec!["prove", &program, "--backend", "cpu"];
    args.extend(extra);
    let output = miden_gpu(&args);
    assert_success(&output);
    report_value(&output, "program hash")
}

/// `verify` of `proof` against `hash` (default inputs and outputs files next to the proof).
fn verify(hash: &str, proof: &Path) -> Output {
    miden_gpu(&["verify", "--program-hash", hash, "--proof", &arg(proof)])
}

/// The stack of an outputs file.
fn written_outputs(path: &Path) -> Vec<u64> {
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(path).expect("read the outputs file")).expect("JSON");
    json["stack"]
        .as_array()
        .expect("a stack array")
        .iter()
        .map(|value| value.as_str().expect("a string").parse().expect("an integer"))
        .collect()
}

// ROUND TRIPS
// ================================================================================================

/// Proves with `hash_args`, checks the printed and written outputs and verifies.
fn round_trip(name: &str, hash_args: &[&str], hash_fn: &str) {
    let dir = TempDir::new(name);
    let hash = prove_program(&dir, hash_args);
    assert_eq!(hash.len(), 64, "program hash `{hash}`");
    assert_eq!(written_outputs(&dir.path("program.outputs")), OUTPUTS);

    let output = verify(&hash, &dir.path("program.proof"));
    assert_success(&output);
    assert!(report_value(&output, "proof file").contains(hash_fn), "{}", stdout(&output));
    assert!(report_value(&output, "verified").contains("96-bit security"), "{}", stdout(&output));
}

#[test]
fn prove_and_verify_rpo() {
    round_trip("rpo", &[], "Rpo256");
}

#[test]
fn prove_and_verify_rpx() {
    round_trip("rpx", &["--hash", "rpx"], "Rpx256");
}

#[test]
fn prove_prints_outputs_and_writes_explicit_paths() {
    let dir = TempDir::new("paths");
    let (proof, outputs) = (dir.path("custom.bin"), dir.path("custom.json"));
    let program = dir.file("program.masm", PROGRAM);
    let inputs = dir.file("inputs.json", INPUTS);
    let (program, inputs, proof, outputs) =
        (arg(&program), arg(&inputs), arg(&proof), arg(&outputs));
    let files = ["-i", &inputs, "-p", &proof, "-o", &outputs];
    let output = miden_gpu(&[&["prove", &program, "-b", "cpu", "-n", "2"], &files[..]].concat());
    assert_success(&output);
    assert_eq!(report_value(&output, "stack outputs"), "[16, 3]");
    assert!(report_value(&output, "backend").starts_with("cpu"));
    assert!(report_value(&output, "time").contains("proving"));
    assert_eq!(written_outputs(Path::new(&outputs)), OUTPUTS);

    // the program hash is accepted with a 0x prefix too
    let hash = format!("0x{}", report_value(&output, "program hash"));
    assert_success(&miden_gpu(&[&["verify", "-x", &hash], &files[..]].concat()));
}

// VERIFICATION FAILURES
// ================================================================================================

#[test]
fn verify_rejects_tampered_proof_and_wrong_statement() {
    let dir = TempDir::new("tampered");
    let hash = prove_program(&dir, &[]);
    let proof = fs::read(dir.path("program.proof")).expect("read the proof");

    // a flipped byte in the proof body: decodes, does not verify
    let mut body = proof.clone();
    body[proof.len() / 2] ^= 0x5a;
    let tampered = dir.file("body.proof", body);
    fs::copy(dir.path("program.outputs"), dir.path("body.outputs")).expect("copy outputs");
    fs::copy(dir.path("program.inputs"), dir.path("body.inputs")).expect("copy inputs");
    let output = verify(&hash, &tampered);
    assert!(!output.status.success(), "a tampered proof verified");
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));

    // a flipped byte in the header (proof options Winterfell asserts on): a clean error
    let mut header = proof.clone();
    header[16] ^= 0x5a;
    let tampered = dir.file("header.proof", header);
    fs::copy(dir.path("program.outputs"), dir.path("header.outputs")).expect("copy outputs");
    assert_error(&verify(&hash, &tampered), "invalid proof file");

    // the right proof against other outputs, another program hash or other inputs
    let proof = dir.path("program.proof");
    let wrong = dir.file("wrong.json", r#"{ "stack": ["17", "3"] }"#);
    let (proof_arg, wrong_arg) = (arg(&proof), arg(&wrong));
    let failure = "proof verification failed";
    assert_error(&miden_gpu(&["verify", "-x", &hash, "-p", &proof_arg, "-o", &wrong_arg]), failure);
    let other_hash = format!("{}{}", &hash[..63], if hash.ends_with('0') { '1' } else { '0' });
    assert_error(&verify(&other_hash, &proof), failure);
    let other_inputs = dir.file("other.inputs", r#"{ "operand_stack": ["5", "4"] }"#);
    let other_arg = arg(&other_inputs);
    assert_error(&miden_gpu(&["verify", "-x", &hash, "-p", &proof_arg, "-i", &other_arg]), failure);
}

#[test]
fn verify_rejects_undecodable_proof() {
    let dir = TempDir::new("junk");
    let junk = dir.file("junk.proof", b"not a proof at all");
    dir.file("junk.outputs", r#"{ "stack": ["16", "3"] }"#);
    assert_error(&verify(&"0".repeat(64), &junk), "invalid proof file");
}

#[test]
fn verify_rejects_bad_program_hash() {
    let dir = TempDir::new("hash");
    let proof = dir.file("program.proof", b"");
    assert_error(&verify("1234", &proof), "invalid program hash `1234`");
}

#[test]
fn verify_reports_missing_proof() {
    let dir = TempDir::new("no-proof");
    assert_error(&verify(&"0".repeat(64), &dir.path("none.proof")), "cannot read proof file");
}

// PROVE FAILURES
// ================================================================================================

/// Runs `prove` of `program` (written as `program.masm`) with `args`.
fn prove_with(dir: &TempDir, program: &str, args: &[&str]) -> Output {
    let program = dir.file("program.masm", program);
    miden_gpu(&[&["prove", &arg(&program)], args].concat())
}

#[test]
fn prove_reports_missing_program() {
    let dir = TempDir::new("no-program");
    let missing = dir.path("missing.masm");
    assert_error(&miden_gpu(&["prove", &arg(&missing)]), "cannot read program file");
}

#[test]
fn prove_reports_missing_inputs() {
    let dir = TempDir::new("no-inputs");
    let missing = arg(&dir.path("missing.json"));
    assert_error(
        &prove_with(&dir, PROGRAM, &["-b", "cpu", "-i", &missing]),
        "cannot read inputs file",
    );
}

#[test]
fn prove_reports_assembly_errors() {
    let dir = TempDir::new("assembly");
    let output = prove_with(&dir, "begin push.1 no_such_instruction end", &["-b", "cpu"]);
    assert_error(&output, "failed to assemble");
    assert!(stderr(&output).contains("no_such_instruction"), "{}", stderr(&output));
}

#[test]
fn prove_reports_execution_errors() {
    let dir = TempDir::new("execution");
    assert_error(
        &prove_with(&dir, "begin push.1 push.2 assert_eq end", &["-b", "cpu"]),
        "program execution failed",
    );
}

#[test]
fn prove_reports_bad_inputs() {
    let cases = [
        ("{ \"operand_stack\": [\"1\"", "invalid inputs file"),
        ("{ \"advice_stack\": [] }", "missing field `operand_stack`"),
        ("{ \"operand_stack\": [1] }", "expected a string"),
        ("{ \"operand_stack\": [\"x\"] }", "operand_stack[0]: `x` is not an unsigned integer"),
        ("{ \"operand_stack\": [\"18446744069414584321\"] }", "is not a field element"),
        ("{ \"operand_stack\": [], \"advice_stack\": [\"-1\"] }", "advice_stack[0]"),
        ("{ \"operand_stack\": [], \"advice_map\": { \"0x12\": [1] } }", "is not a hex word"),
        (
            "{ \"operand_stack\": [\"1\", \"2\", \"3\", \"4\", \"5\", \"6\", \"7\", \"8\", \"9\", \
             \"10\", \"11\", \"12\", \"13\", \"14\", \"15\", \"16\", \"17\"] }",
            "operand_stack",
        ),
        (
            "{ \"operand_stack\": [], \"merkle_store\": [ { \"merkle_tree\": [\"0x1\"] } ] }",
            "merkle_store[0][0]",
        ),
    ];
    let dir = TempDir::new("inputs");
    for (inputs, message) in cases {
        let path = arg(&dir.file("bad.json", inputs));
        assert_error(&prove_with(&dir, PROGRAM, &["-b", "cpu", "-i", &path]), message);
    }
}

#[test]
fn prove_rejects_unknown_option_values() {
    let dir = TempDir::new("options");
    let cases: [(&[&str], &str); 6] = [
        (&["--backend", "tpu"], "unknown backend `tpu`"),
        (&["--execution", "fast"], "unknown execution `fast`"),
        (&["--hash", "sha3"], "unknown hash function `sha3`"),
        (&["--hasher", "blake3"], "unknown hash function `blake3`"),
        (&["--security", "100"], "expected 96 or 128"),
        (&["--max-cycles", "1"], "invalid execution options"),
    ];
    for (args, message) in cases {
        assert_error(&prove_with(&dir, PROGRAM, args), message);
    }
}

#[test]
fn prove_rejects_unsupported_program_files() {
    let dir = TempDir::new("kind");
    let text = dir.file("program.txt", PROGRAM);
    assert_error(&miden_gpu(&["prove", &arg(&text)]), "expected a .masm");
    let package = dir.file("program.masp", b"not a package");
    assert_error(&miden_gpu(&["prove", &arg(&package)]), "invalid program file");
}

/// Without the `cuda` feature, asking for CUDA is an error, not a silent fallback.
#[cfg(not(feature = "cuda"))]
#[test]
fn prove_reports_unavailable_backend() {
    let dir = TempDir::new("cuda");
    assert_error(
        &prove_with(&dir, PROGRAM, &["--backend", "cuda"]),
        "backend `cuda` is unavailable",
    );
}

// OPTIONS THE VERIFIER REFUSES
// ================================================================================================

/// A hash function and security level that `miden_verifier` refuses are invalid arguments,
/// refused before the program runs (this one would fail), with the accepted pairs named.
#[test]
fn prove_refuses_pairs_the_verifier_refuses() {
    let dir = TempDir::new("pairs");
    let failing = "begin push.1 push.2 assert_eq end";
    for (hasher, security) in [("blake3-256", "96"), ("blake3-192", "128"), ("poseidon2", "128")] {
        let output = prove_with(&dir, failing, &["-b", "cpu", "--hasher", hasher, "-s", security]);
        assert_error_status(&output, 2, "invalid --hasher and --security");
        for pair in ["rpo at 96 or 128 bits", "blake3-192 at 96 bits", "blake3-256 at 128 bits"] {
            assert!(stderr(&output).contains(pair), "`{pair}` not in:\n{}", stderr(&output));
        }
    }
    assert!(!dir.path("program.proof").exists());
}

// FILES WRITTEN
// ================================================================================================

/// Proof and outputs paths that would overwrite each other or a file the command reads are
/// invalid arguments, refused before anything is written.
#[test]
fn prove_refuses_colliding_paths() {
    let dir = TempDir::new("collide");
    let program = arg(&dir.file("program.masm", PROGRAM));
    let inputs = arg(&dir.file("program.inputs", INPUTS));
    let x = arg(&dir.file("x", "keep"));
    fs::create_dir(dir.path("sub")).expect("create a directory");
    let inputs_elsewhere = arg(&dir.path("sub/../program.inputs"));
    let missing = arg(&dir.path("none/program.outputs"));
    let cases: [(&[&str], &str); 7] = [
        (&["-p", &x, "-o", &x], "the proof file and the outputs file are the same file"),
        (&["-o", &inputs], "the outputs file and the inputs file are the same file"),
        (&["-p", &program], "the proof file and the program file are the same file"),
        (&["-p", &inputs_elsewhere], "the proof file and the inputs file are the same file"),
        (&["-o", &x, "-i", &x], "the outputs file and the inputs file are the same file"),
        (&["-p", &arg(&dir.path("sub"))], "cannot write proof file"),
        (&["-o", &missing], "its directory does not exist"),
    ];
    let before = dir.names();
    for (args, message) in cases {
        let output = miden_gpu(&[&["prove", &program, "-b", "cpu"], args].concat());
        let status = if message.starts_with("the") { 2 } else { 1 };
        assert_error_status(&output, status, message);
        assert_eq!(fs::read_to_string(&x).expect("read x"), "keep", "{args:?} wrote x");
        assert_eq!(fs::read_to_string(&inputs).expect("read the inputs"), INPUTS);
        assert_eq!(dir.names(), before, "{args:?} left files");
    }
}

/// Proof and outputs files are replaced whole (no temporary file is left), and a failed `prove`
/// leaves the previous ones as they were.
#[test]
fn prove_replaces_files_whole_or_not_at_all() {
    let dir = TempDir::new("replace");
    let hash = prove_program(&dir, &[]);
    let proof = fs::read(dir.path("program.proof")).expect("read the proof");
    prove_program(&dir, &[]);
    assert_eq!(dir.names(), ["program.inputs", "program.masm", "program.outputs", "program.proof"]);
    assert_success(&verify(&hash, &dir.path("program.proof")));

    let output = prove_with(&dir, "begin push.1 push.2 assert_eq end", &["-b", "cpu"]);
    assert_error_status(&output, 1, "program execution failed");
    assert_eq!(fs::read(dir.path("program.proof")).expect("read the proof"), proof);
    assert_eq!(written_outputs(&dir.path("program.outputs")), OUTPUTS);
    assert_eq!(dir.names(), ["program.inputs", "program.masm", "program.outputs", "program.proof"]);
}

/// A backend that returns wrong roots as successes (feature `fault-injection`): the proof fails
/// its self-check, is made again on the CPU with a warning, and only that proof, which
/// verifies, is written.
#[cfg(feature = "fault-injection")]
#[test]
fn prove_never_writes_a_proof_that_does_not_verify() {
    let dir = TempDir::new("wrong-root");
    let program = dir.file("program.masm", PROGRAM);
    dir.file("program.inputs", INPUTS);
    let output = miden_gpu(&["prove", &arg(&program), "--backend", "cpu", "--inject-wrong-root"]);
    assert_success(&output);
    assert!(
        stderr(&output).contains("the proof does not verify; proving again on the CPU backend"),
        "no warning of the failed self-check: {}",
        stderr(&output)
    );
    assert!(report_value(&output, "backend").contains("with wrong roots"), "{}", stdout(&output));
    let hash = report_value(&output, "program hash");
    assert_success(&verify(&hash, &dir.path("program.proof")));
    assert_eq!(written_outputs(&dir.path("program.outputs")), OUTPUTS);
}

// ENVIRONMENT
// ================================================================================================

/// A malformed `MIDEN_GPU_*` value is an `error:` line and status 1, not a silent default.
#[test]
fn prove_reports_malformed_environment() {
    let dir = TempDir::new("environment");
    let program = arg(&dir.file("program.masm", PROGRAM));
    let mut cases = vec![("MIDEN_GPU_BACKEND", "tpu", "unknown backend `tpu`")];
    if cfg!(feature = "cuda") {
        cases.push(("MIDEN_GPU_DEVICES", "x", "invalid device list `x`"));
        cases.push(("MIDEN_GPU_CUDA_MEMORY_LIMIT", "lots", "lots"));
    }
    for (name, value, message) in cases {
        let output = command(&["prove", &program]).env(name, value).output().expect("run");
        assert_error_status(&output, 1, message);
        assert!(!dir.path("program.proof").exists(), "{name}={value} proved");
    }
}

// SEVERAL PROGRAMS
// ================================================================================================

/// Programs without inputs proved beside [`PROGRAM`], and one that does not assemble.
const OTHER_PROGRAMS: [(&str, &str); 2] = [
    ("add.masm", "begin push.1 push.2 add swap drop end"),
    ("mul.masm", "begin push.3 push.4 mul push.5 add swap drop end"),
];
const BAD_PROGRAM: (&str, &str) = ("bad.masm", "begin push.1 no_such_instruction end");

/// The value of the `name` line in the report block of `program` (from its `program` line to
/// the next blank line) of a several-program `prove`.
fn block_value(output: &Output, program: &Path, name: &str) -> String {
    let stdout = stdout(output);
    let block = stdout
        .split("\n\n")
        .find(|block| {
            block
                .lines()
                .any(|line| line.strip_prefix("program ").is_some_and(|v| v.trim() == arg(program)))
        })
        .unwrap_or_else(|| panic!("no report of {}:\n{stdout}", program.display()));
    block
        .lines()
        .find_map(|line| line.strip_prefix(name).map(|value| value.trim().to_string()))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{block}"))
}

/// Whether two proofs of one program are the same: byte for byte, or (the grinding nonce is the
/// first one any thread finds) equal but for the nonce, every commitment equal.
fn same_proof(a: &[u8], b: &[u8]) -> bool {
    let stark = |bytes: &[u8]| {
        miden_prover::ExecutionProof::from_bytes(bytes).expect("an execution proof").into_parts().1
    };
    a == b || miden_gpu::compare_proofs(&stark(a), &stark(b)).is_match()
}

/// Both executions give the program the same proof, which verifies; a program that runs past
/// `--max-cycles` fails under both.
#[test]
fn prove_with_either_execution() {
    let dir = TempDir::new("executions");
    let hash = prove_program(&dir, &["--execution", "reference"]);
    let reference = fs::read(dir.path("program.proof")).expect("the reference execution's proof");
    assert_eq!(prove_program(&dir, &["--execution", "parallel"]), hash);
    let parallel = fs::read(dir.path("program.proof")).expect("the parallel execution's proof");
    assert!(same_proof(&reference, &parallel), "the executions give different proofs");
    assert_success(&verify(&hash, &dir.path("program.proof")));

    // about 6 000 cycles
    let long = "begin repeat.3000 push.1 drop end end";
    for execution in ["reference", "parallel"] {
        let args = ["-b", "cpu", "--max-cycles", "4096", "--execution", execution];
        let output = prove_with(&dir, long, &args);
        assert_error(&output, "exceeded the allowed number of max cycles 4096");
    }
}

/// Three programs and one that does not assemble, proved in one call: the bad one has its own
/// `error:` line and the status is 1; each good one's files are written, its proof verifies and
/// equals the proof of the program proved alone.
#[test]
fn prove_several_programs_as_alone() {
    let dir = TempDir::new("several");
    let mut good = vec![dir.file("program.masm", PROGRAM)];
    dir.file("program.inputs", INPUTS);
    good.extend(OTHER_PROGRAMS.iter().map(|(name, source)| dir.file(name, source)));
    let bad = dir.file(BAD_PROGRAM.0, BAD_PROGRAM.1);
    let mut args =
        vec!["prove".to_string(), "-b".into(), "cpu".into(), "--jobs".into(), "3".into()];
    args.extend([&good[0], &bad, &good[1], &good[2]].map(|path| arg(path)));
    let output = miden_gpu(&args.iter().map(String::as_str).collect::<Vec<_>>());

    assert_error_status(&output, 1, "1 of 4 programs failed");
    let errors = stderr(&output);
    assert!(
        errors.contains(&format!("error: {}: failed to assemble", arg(&bad))),
        "no error line naming the bad program:\n{errors}"
    );
    assert!(!dir.path("bad.proof").exists() && !dir.path("bad.outputs").exists());
    assert_eq!(report_value(&output, "programs"), "3 proved, 1 failed");
    assert!(report_value(&output, "peak memory").contains("MiB resident"), "{}", stdout(&output));
    assert_eq!(written_outputs(&dir.path("program.outputs")), OUTPUTS);

    let alone = TempDir::new("several-alone");
    alone.file("program.inputs", INPUTS);
    for program in &good {
        let name = program.file_name().expect("a file name").to_string_lossy().into_owned();
        let proof = program.with_extension("proof");
        let hash = block_value(&output, program, "program hash");
        assert_success(&verify(&hash, &proof));

        let single = alone.file(&name, fs::read(program).expect("read the program"));
        assert_success(&miden_gpu(&["prove", &arg(&single), "-b", "cpu"]));
        let (together, by_itself) = (fs::read(&proof), fs::read(single.with_extension("proof")));
        assert!(
            same_proof(&together.expect("proof"), &by_itself.expect("proof alone")),
            "{name}: the proof differs from the program's proof alone"
        );
    }
}

/// `-i`, `-p` and `-o` name one program's files: with several programs they are invalid
/// arguments; so are programs whose default files collide. Nothing is written.
#[test]
fn prove_several_refuses_single_file_flags_and_shared_outputs() {
    let dir = TempDir::new("several-refused");
    let a = arg(&dir.file("a.masm", OTHER_PROGRAMS[0].1));
    let b = arg(&dir.file("b.masm", OTHER_PROGRAMS[1].1));
    let package = arg(&dir.file("a.masp", b"not even read"));
    let proof = arg(&dir.path("x.proof"));
    let cases: [(&[&str], &str); 4] = [
        (&["-p", &proof, &a, &b], "-p/--proof names a file of one program"),
        (&["-i", &a, &a, &b], "-i/--input names a file of one program"),
        (&[&a, &b, &package], "would both write"),
        (&[&a, &b, &a], "would both write"),
    ];
    let before = dir.names();
    for (args, message) in cases {
        let output = miden_gpu(&[&["prove", "-b", "cpu"], args].concat());
        assert_error_status(&output, 2, message);
        assert_eq!(dir.names(), before, "{args:?} wrote files");
    }
}
