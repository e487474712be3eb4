//! The files of miden-vm's `miden prove` / `miden verify`, read and written in the same formats:
//!
//! - inputs (`<program>.inputs`, JSON): `operand_stack` (decimal strings, the last one on top),
//!   optional `advice_stack` (decimal strings), `advice_map` (`"0x<64 hex digits>"` word keys to
//!   lists of integers) and `merkle_store` (a list of `merkle_tree`, `sparse_merkle_tree` or
//!   `partial_merkle_tree` objects over `"0x<64 hex digits>"` words);
//! - outputs (`<program>.outputs`, JSON): `{ "stack": [...] }`, the 16 stack outputs as decimal
//!   strings, the top first;
//! - proof (`<program>.proof`): the bytes of `ExecutionProof::to_bytes`;
//! - program hash: the 32 bytes of the program's MAST root, in hex (a `0x` prefix is optional).

use std::{
    collections::BTreeMap,
    fs::{self, File, OpenOptions},
    io::{Read, Write},
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
};

use miden_processor::{
    crypto::{MerkleStore, MerkleTree, NodeIndex, PartialMerkleTree, SimpleSmt},
    math::StarkField,
    AdviceInputs, Felt, StackInputs, StackOutputs, Word,
};
use miden_prover::ExecutionProof;
use serde::{Deserialize, Serialize};

use crate::{
    error::{CliError, FileKind},
    untrusted::{check_openings, decode},
};

/// Depth of the `sparse_merkle_tree` entries of an inputs file (leaf indexes are `u64`s).
const SIMPLE_SMT_DEPTH: u8 = u64::BITS as u8;

// INPUT FILE
// ================================================================================================

/// The inputs file: initial operand stack and advice inputs (the optional fields may be absent or
/// `null`, as for miden-vm).
#[derive(Debug, Default, Deserialize)]
pub struct InputFile {
    /// Initial operand stack, at most 16 field elements as decimal strings; the last is on top.
    operand_stack: Vec<String>,
    /// Initial advice stack, field elements as decimal strings.
    advice_stack: Option<Vec<String>>,
    /// Initial advice map: hex word keys to lists of field elements.
    advice_map: Option<BTreeMap<String, Vec<u64>>>,
    /// Merkle trees whose nodes go into the initial Merkle store.
    merkle_store: Option<Vec<MerkleData>>,
}

/// One Merkle tree of an inputs file's `merkle_store`.
#[derive(Debug, Deserialize)]
enum MerkleData {
    /// The leaves of a full binary tree, as hex words.
    #[serde(rename = "merkle_tree")]
    Full(Vec<String>),
    /// `(leaf index, hex word)` pairs of a sparse Merkle tree of depth 64.
    #[serde(rename = "sparse_merkle_tree")]
    Sparse(Vec<(u64, String)>),
    /// `((depth, index), hex word)` nodes of a partial Merkle tree.
    #[serde(rename = "partial_merkle_tree")]
    Partial(Vec<((u8, u64), String)>),
}

/// The parsed content of an inputs file, and the path it came from (for error messages).
pub struct Inputs {
    /// The file read, or `None` for the empty inputs of a program without an inputs file.
    pub path: Option<PathBuf>,
    file: InputFile,
}

impl Inputs {
    /// Reads the inputs of a program (or proof) at `target`: `explicit` if given, else
    /// `<target>.inputs` if it exists, else empty inputs (miden-vm's rule).
    pub fn read(explicit: Option<&Path>, target: &Path) -> Result<Self, CliError> {
        let Some(path) = Self::path(explicit, target) else {
            return Ok(Self { path: None, file: InputFile::default() });
        };
        let file = read_json(FileKind::Inputs, &path)?;
        Ok(Self { path: Some(path), file })
    }

    /// The inputs of a job: `value`, an inputs file's JSON object (`null` for empty inputs),
    /// named `path` in errors.
    #[cfg(feature = "service")]
    pub fn from_json(value: serde_json::Value, path: &Path) -> Result<Self, CliError> {
        let file = match value {
            serde_json::Value::Null => InputFile::default(),
            value => serde_json::from_value(value)
                .map_err(|e| CliError::invalid(FileKind::Inputs, path, e))?,
        };
        Ok(Self { path: Some(path.to_path_buf()), file })
    }

    /// The inputs file [`Self::read`] reads: `explicit`, else `<target>.inputs` if it exists.
    pub fn path(explicit: Option<&Path>, target: &Path) -> Option<PathBuf> {
        match explicit {
            Some(path) => Some(path.to_path_buf()),
            None => Some(target.with_extension("inputs")).filter(|path| path.exists()),
        }
    }

    /// The initial operand stack.
    pub fn stack_inputs(&self) -> Result<StackInputs, CliError> {
        let values = self.felts("operand_stack", &self.file.operand_stack)?;
        StackInputs::new(values).map_err(|e| self.invalid(format!("operand_stack: {e}")))
    }

    /// The advice stack, map and Merkle store.
    pub fn advice_inputs(&self) -> Result<AdviceInputs, CliError> {
        let stack =
            self.felts("advice_stack", self.file.advice_stack.as_deref().unwrap_or_default())?;
        let mut map = Vec::new();
        for (key, values) in self.file.advice_map.iter().flatten() {
            let at = format!("advice_map[{key}]");
            let values = values
                .iter()
                .enumerate()
                .map(|(i, &value)| self.felt(&format!("{at}[{i}]"), value))
                .collect::<Result<Vec<_>, _>>()?;
            map.push((self.word(&at, key)?, values));
        }
        let mut store = MerkleStore::default();
        for (i, tree) in self.file.merkle_store.iter().flatten().enumerate() {
            self.add_tree(&mut store, &format!("merkle_store[{i}]"), tree)?;
        }
        Ok(AdviceInputs::default().with_stack(stack).with_map(map).with_merkle_store(store))
    }

    /// Adds the inner nodes of one `merkle_store` entry to `store`.
    fn add_tree(
        &self,
        store: &mut MerkleStore,
        at: &str,
        tree: &MerkleData,
    ) -> Result<(), CliError> {
        let word = |i: usize, hex: &String| self.word(&format!("{at}[{i}]"), hex);
        let bad_tree = |e: &dyn std::fmt::Display| self.invalid(format!("{at}: {e}"));
        match tree {
            MerkleData::Full(leaves) => {
                let leaves: Vec<Word> =
                    leaves.iter().enumerate().map(|(i, v)| word(i, v)).collect::<Result<_, _>>()?;
                let tree = MerkleTree::new(leaves).map_err(|e| bad_tree(&e))?;
                store.extend(tree.inner_nodes());
            },
            MerkleData::Sparse(entries) => {
                let entries: Vec<(u64, Word)> = entries
                    .iter()
                    .enumerate()
                    .map(|(i, (index, v))| Ok((*index, word(i, v)?)))
                    .collect::<Result<_, CliError>>()?;
                let tree = SimpleSmt::<SIMPLE_SMT_DEPTH>::with_leaves(entries)
                    .map_err(|e| bad_tree(&e))?;
                store.extend(tree.inner_nodes());
            },
            MerkleData::Partial(entries) => {
                let entries: Vec<(NodeIndex, Word)> = entries
                    .iter()
                    .enumerate()
                    .map(|(i, ((depth, index), v))| {
                        let node = NodeIndex::new(*depth, *index).map_err(|e| bad_tree(&e))?;
                        Ok((node, word(i, v)?))
                    })
                    .collect::<Result<_, CliError>>()?;
                let tree = PartialMerkleTree::with_leaves(entries).map_err(|e| bad_tree(&e))?;
                store.extend(tree.inner_nodes());
            },
        }
        Ok(())
    }

    /// Decimal strings as field elements; `field` names the list in error messages.
    fn felts(&self, field: &str, values: &[String]) -> Result<Vec<Felt>, CliError> {
        values
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let at = format!("{field}[{i}]");
                let value = text.trim().parse::<u64>().map_err(|e| {
                    self.invalid(format!("{at}: `{text}` is not an unsigned integer ({e})"))
                })?;
                self.felt(&at, value)
            })
            .collect()
    }

    /// A field element, or an error naming `at` if `value` is not below the modulus.
    fn felt(&self, at: &str, value: u64) -> Result<Felt, CliError> {
        Felt::try_from(value).map_err(|_| {
            self.invalid(format!(
                "{at}: {value} is not a field element (must be below {})",
                Felt::MODULUS
            ))
        })
    }

    /// A `0x`-prefixed hex word, or an error naming `at`.
    fn word(&self, at: &str, hex: &str) -> Result<Word, CliError> {
        Word::try_from(hex)
            .map_err(|e| self.invalid(format!("{at}: `{hex}` is not a hex word ({e})")))
    }

    fn invalid(&self, message: String) -> CliError {
        CliError::invalid(FileKind::Inputs, self.path.clone().unwrap_or_default(), message)
    }
}

// OUTPUT FILE
// ================================================================================================

/// The outputs file: the stack outputs, the top first.
#[derive(Debug, Serialize, Deserialize)]
pub struct OutputFile {
    /// The 16 stack outputs as decimal strings.
    stack: Vec<String>,
}

impl OutputFile {
    /// The outputs file of `outputs`, staged next to `path` (see [`StagedFile`]).
    pub fn stage(outputs: &StackOutputs, path: &Path) -> Result<StagedFile, CliError> {
        let file = Self { stack: outputs.iter().map(Felt::to_string).collect() };
        let mut json = serde_json::to_string_pretty(&file)
            .map_err(|e| CliError::invalid(FileKind::Outputs, path, e))?;
        json.push('\n');
        StagedFile::write(FileKind::Outputs, path, json.as_bytes())
    }

    /// Reads the stack outputs from `path`.
    pub fn read(path: &Path) -> Result<StackOutputs, CliError> {
        let file: Self = read_json(FileKind::Outputs, path)?;
        let invalid = |message: String| CliError::invalid(FileKind::Outputs, path, message);
        let values = file
            .stack
            .iter()
            .enumerate()
            .map(|(i, text)| {
                text.trim().parse::<u64>().map_err(|e| {
                    invalid(format!("stack[{i}]: `{text}` is not an unsigned integer ({e})"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        StackOutputs::try_from_ints(values).map_err(|e| invalid(format!("stack: {e}")))
    }
}

// PROOF FILE
// ================================================================================================

/// The proof's bytes, staged next to `path` (see [`StagedFile`]); returns them with their size.
pub fn stage_proof(proof: &ExecutionProof, path: &Path) -> Result<(StagedFile, usize), CliError> {
    let bytes = proof.to_bytes();
    Ok((StagedFile::write(FileKind::Proof, path, &bytes)?, bytes.len()))
}

/// Reads a proof from `path`, an untrusted file: at most [`MAX_FILE_BYTES`], decoded with every
/// length bounded by the bytes present and its Merkle openings checked the same way before the
/// verifier parses them (see [`crate::untrusted`]).
pub fn read_proof(path: &Path) -> Result<ExecutionProof, CliError> {
    decode_proof(&read_file(FileKind::Proof, path)?, path)
}

/// A proof from the untrusted `bytes` of `path`, decoded as [`read_proof`] decodes a file.
pub fn decode_proof(bytes: &[u8], path: &Path) -> Result<ExecutionProof, CliError> {
    let invalid = |e: String| {
        CliError::invalid(FileKind::Proof, path, format!("not a Miden execution proof ({e})"))
    };
    let proof: ExecutionProof = decode(bytes).map_err(invalid)?;
    check_openings(&proof).map_err(invalid)?;
    Ok(proof)
}

// PROGRAM HASH
// ================================================================================================

/// The program hash as `miden prove` prints it: 64 hex digits, no prefix.
pub fn program_hash_hex(hash: &Word) -> String {
    hash.to_hex().trim_start_matches("0x").to_string()
}

/// Parses a program hash printed by `prove` (with or without a `0x` prefix).
pub fn parse_program_hash(hex: &str) -> Result<Word, CliError> {
    let digits = hex.trim().trim_start_matches("0x");
    Word::try_from(format!("0x{digits}").as_str()).map_err(|e| CliError::ProgramHash {
        hash: hex.to_string(),
        reason: format!("{e}; expected the 64 hex digits printed by `prove`"),
    })
}

// FILE ACCESS
// ================================================================================================

/// The largest file the command line reads (proofs, programs, packages, libraries, inputs and
/// outputs): 64 MiB, far above any of them (a proof is a few hundred KB), and small enough that
/// a hostile file cannot exhaust memory.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Reads and deserializes a JSON file.
fn read_json<T: for<'de> Deserialize<'de>>(kind: FileKind, path: &Path) -> Result<T, CliError> {
    let bytes = read_file(kind, path)?;
    serde_json::from_slice(&bytes).map_err(|e| CliError::invalid(kind, path, e))
}

/// Reads a whole file of at most [`MAX_FILE_BYTES`] (a larger one is refused before it is read).
pub fn read_file(kind: FileKind, path: &Path) -> Result<Vec<u8>, CliError> {
    let read_error = |source| CliError::Read { kind, path: path.to_path_buf(), source };
    let too_large = || {
        CliError::invalid(kind, path, format!("larger than the limit of {MAX_FILE_BYTES} bytes"))
    };
    let file = File::open(path).map_err(read_error)?;
    if file.metadata().map_err(read_error)?.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    // a file that grows while it is read (or a device file without a size) stops at the limit
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// A file written in full under a temporary name in its target's directory and synced to disk;
/// [`Self::commit`] renames it over the target, so a reader sees the old file or the new one,
/// never a part. Dropped uncommitted, the temporary file is removed and the target is untouched.
pub struct StagedFile {
    kind: FileKind,
    temp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl StagedFile {
    /// Writes `bytes` to a new temporary file next to `target` and syncs it.
    pub fn write(kind: FileKind, target: &Path, bytes: &[u8]) -> Result<Self, CliError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = target.file_name().unwrap_or_default().to_string_lossy();
        let unique =
            format!(".{name}.{}-{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let temp = target.with_file_name(unique);
        let write_error = |source| CliError::Write { kind, path: target.to_path_buf(), source };
        let mut file =
            OpenOptions::new().write(true).create_new(true).open(&temp).map_err(write_error)?;
        let staged = Self { kind, temp, target: target.to_path_buf(), committed: false };
        file.write_all(bytes).and_then(|()| file.sync_all()).map_err(write_error)?;
        Ok(staged)
    }

    /// Renames the temporary file over the target and syncs the directory (where the system
    /// allows), so the new file survives a crash.
    pub fn commit(mut self) -> Result<(), CliError> {
        let write_error =
            |source| CliError::Write { kind: self.kind, path: self.target.clone(), source };
        fs::rename(&self.temp, &self.target).map_err(write_error)?;
        self.committed = true;
        let directory = match self.target.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        // not every system can open a directory to sync it; the rename itself is done
        if let Ok(directory) = File::open(directory) {
            let _ = directory.sync_all();
        }
        Ok(())
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temp);
        }
    }
}
