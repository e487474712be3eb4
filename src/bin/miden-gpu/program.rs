//! Loading a program as miden-vm's CLI does: a `.masm` file assembled against the Miden core
//! library and any `.masl` libraries, or a `.masp` package; and the host that executes it.

use std::{path::Path, sync::Arc};

use miden_assembly::{
    ast::{Module, ModuleKind},
    debuginfo::{DefaultSourceManager, SourceLanguage, SourceManager, Uri},
    Assembler, Library, Path as LibraryPath,
};
use miden_core_lib::CoreLibrary;
use miden_mast_package::{MastArtifact, Package};
use miden_processor::{DefaultHost, Program};

use crate::{
    data::read_file,
    error::{CliError, FileKind},
    untrusted::decode,
};

/// An assembled program, the libraries it links, and the source manager of its diagnostics.
pub struct LoadedProgram {
    /// The program.
    pub program: Program,
    libraries: Vec<Library>,
    source_manager: Arc<DefaultSourceManager>,
}

impl LoadedProgram {
    /// Loads the `.masm` or `.masp` file at `path`, linking the `.masl` libraries at
    /// `library_paths` (and, for `.masm`, the core library).
    pub fn load(path: &Path, library_paths: &[impl AsRef<Path>]) -> Result<Self, CliError> {
        let libraries = library_paths
            .iter()
            .map(|path| read_library(path.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        match path.extension().and_then(|ext| ext.to_str()) {
            Some("masm") => {
                let bytes = read_file(FileKind::Program, path)?;
                let source = String::from_utf8(bytes).map_err(|e| {
                    CliError::invalid(FileKind::Program, path, format!("not UTF-8 text ({e})"))
                })?;
                Self::from_masm(path, source, libraries)
            },
            Some("masp") => Self::from_package(path, &read_file(FileKind::Program, path)?),
            _ => Err(CliError::invalid(
                FileKind::Program,
                path,
                "expected a .masm assembly file or a .masp package",
            )),
        }
    }

    /// Assembles the `.masm` `source` (named `path` in diagnostics) against the core library and
    /// `libraries`.
    pub fn from_masm(
        path: &Path,
        source: String,
        libraries: Vec<Library>,
    ) -> Result<Self, CliError> {
        let source_manager = Arc::new(DefaultSourceManager::default());
        let program = assemble(path, source, &libraries, source_manager.clone())?;
        Ok(Self { program, libraries, source_manager })
    }

    /// The program of the `.masp` package `bytes` (named `path` in errors; untrusted bytes: see
    /// [`decode`]).
    pub fn from_package(path: &Path, bytes: &[u8]) -> Result<Self, CliError> {
        let program = read_package(path, bytes)?;
        let source_manager = Arc::new(DefaultSourceManager::default());
        Ok(Self { program, libraries: Vec::new(), source_manager })
    }

    /// A host with the core library's and the linked libraries' code and event handlers, whose
    /// execution errors point into the program's source.
    pub fn host(&self) -> Result<DefaultHost, CliError> {
        let mut host = DefaultHost::default()
            .with_library(&CoreLibrary::default())
            .map_err(CliError::execution)?;
        for library in &self.libraries {
            host.load_library(library.mast_forest()).map_err(CliError::execution)?;
        }
        Ok(host.with_source_manager(self.source_manager.clone()))
    }
}

// HELPERS
// ================================================================================================

/// Parses and assembles the `.masm` executable module `source`, named `path`.
fn assemble(
    path: &Path,
    source: String,
    libraries: &[Library],
    source_manager: Arc<DefaultSourceManager>,
) -> Result<Program, CliError> {
    let uri = Uri::from(path.display().to_string());
    let file = source_manager.load(SourceLanguage::Masm, uri, source);
    let failed = |report| CliError::assembly(path, &report);

    let module = Module::parser(ModuleKind::Executable)
        .parse(LibraryPath::exec_path(), file, source_manager.clone())
        .map_err(failed)?;
    let mut assembler = Assembler::new(source_manager)
        .with_dynamic_library(CoreLibrary::default())
        .map_err(failed)?;
    for library in libraries {
        assembler.link_dynamic_library(library).map_err(failed)?;
    }
    assembler.assemble_program(module).map_err(failed)
}

/// Reads a `.masl` library (untrusted bytes: see [`decode`]).
fn read_library(path: &Path) -> Result<Library, CliError> {
    let bytes = read_file(FileKind::Library, path)?;
    decode(&bytes).map_err(|e| CliError::invalid(FileKind::Library, path, e))
}

/// The program of the `.masp` package `bytes` read from `path` (untrusted bytes: see
/// [`decode`]).
fn read_package(path: &Path, bytes: &[u8]) -> Result<Program, CliError> {
    let package: Package =
        decode(bytes).map_err(|e| CliError::invalid(FileKind::Program, path, e))?;
    match package.into_mast_artifact() {
        MastArtifact::Executable(program) => Ok(Arc::unwrap_or_clone(program)),
        MastArtifact::Library(_) => Err(CliError::invalid(
            FileKind::Program,
            path,
            "the package is a library, not a program",
        )),
    }
}
