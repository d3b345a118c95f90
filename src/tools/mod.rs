//! Tools the model can call: the [`Tool`] trait and the [`ToolRegistry`] a session offers, and
//! the built-in coding tools.
//!
//! A tool failure is told to the model (an error result) and the turn goes on; only the agent
//! loop decides when a turn ends. Tools reach the editor only through [`ClientBridge`] and know
//! nothing of ACP wire types.
//!
//! - [`paths`]: workspace roots and confinement; [`permission`]: modes, asking, "always";
//! - [`client`]: the editor bridge trait; [`fs`]: file text through the editor or the disk;
//!   [`confined`]: race-free opens and writes beneath a root;
//! - processes (the shell's commands, their guard, their environment, output caps) are
//!   [`crate::process`];
//! - [`display`]: locations, diffs and terminals shown by editors;
//! - [`typed`]: [`TypedTool`](typed::TypedTool), how a tool declares its arguments, and the
//!   blanket [`Tool`] impl that parses them and builds the schema;
//! - the tools: [`read`], [`write`], [`edit`], [`glob`], [`grep`], [`shell`] (`bash`).

pub mod client;
pub mod confined;
#[cfg(test)]
mod disclosure_tests;
pub(crate) mod display;
pub(crate) mod edit;
pub(crate) mod file_stamps;
pub(crate) mod fs;
pub(crate) mod glob;
pub(crate) mod grep;
mod ignore_rules;
pub mod paths;
pub(crate) mod permission;
pub(crate) mod plan;
pub mod private;
pub(crate) mod read;
mod recover;
pub(crate) mod shell;
#[cfg(test)]
mod swap_tests;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod typed;
pub mod walk;
#[cfg(test)]
mod walk_swap_tests;
pub(crate) mod write;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::ToolSpec;
use crate::process::child_env::ChildEnv;
use crate::session::SessionId;
pub use client::ClientBridge;
pub(crate) use display::ToolDisplay;
pub use file_stamps::FileStamps;
pub(crate) use paths::Roots;
pub use permission::{PermissionMode, SessionPermissions};
use private::PrivateFiles;

/// What kind of action a tool performs; mirrors ACP's tool kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    Other,
}

/// Everything a tool call may use.
#[derive(Clone)]
pub struct ToolContext {
    pub(crate) session_id: SessionId,
    pub(crate) cwd: PathBuf,
    pub(crate) cancel: CancellationToken,
    /// The id of this call (the model's tool-call id).
    pub(crate) call_id: String,
    /// Where the session may reach: cwd plus additional directories.
    pub(crate) roots: Arc<Roots>,
    /// The session's permission mode and remembered answers.
    pub permissions: Arc<SessionPermissions>,
    /// The editor, when the session has one.
    pub client: Option<Arc<dyn ClientBridge>>,
    /// What the session's agent last saw of the files it read or wrote.
    pub(crate) files: Arc<FileStamps>,
    /// The environment scrub of the commands it starts.
    pub(crate) child_env: ChildEnv,
    /// kin's own files, which it must not read.
    pub(crate) private: PrivateFiles,
}

impl ToolContext {
    /// A context rooted at `cwd` alone, in `ask` mode, without an editor, under the default
    /// environment scrub and refusing no file as kin's own.
    pub fn new(session_id: impl Into<SessionId>, cwd: PathBuf, cancel: CancellationToken) -> Self {
        Self {
            session_id: session_id.into(),
            roots: Arc::new(Roots::new(cwd.clone(), Vec::new())),
            cwd,
            cancel,
            call_id: String::new(),
            permissions: Arc::new(SessionPermissions::default()),
            client: None,
            files: Arc::default(),
            child_env: ChildEnv::default(),
            private: PrivateFiles::default(),
        }
    }

    /// The editor, if it offers the service `wants` picks from its features.
    pub(crate) fn client_with(
        &self,
        wants: impl Fn(&client::ClientFeatures) -> bool,
    ) -> Option<&Arc<dyn ClientBridge>> {
        self.client.as_ref().filter(|c| wants(&c.features()))
    }

    /// Asks the permission rules (and, if they say so, the user) whether this call may do what
    /// `prompt` describes; see [`SessionPermissions::authorize`].
    pub(crate) async fn authorize(
        &self,
        scope: permission::Scope,
        prompt: client::PermissionPrompt,
    ) -> Result<(), ToolOutput> {
        self.permissions.authorize(scope, prompt, self).await
    }

    /// Resolves a model-given path against the roots; an error result names the problem.
    /// Makes a path tool's errors name its file as the model wrote it (`raw`), not as the
    /// absolute path it resolved to.
    pub(crate) fn name_path_as_given(
        &self,
        raw: Option<&str>,
        result: Result<ToolOutput, ToolOutput>,
    ) -> Result<ToolOutput, ToolOutput> {
        match raw.map(|p| self.resolve(p)) {
            Some(Ok(target)) => {
                let shown = self.roots.display(&target.path);
                result.map_err(|e| e.relabel_path(&target.path, &shown))
            }
            _ => result,
        }
    }

    pub(crate) fn resolve(&self, raw: &str) -> Result<paths::Resolved, ToolOutput> {
        self.roots.resolve(raw).map_err(|error| {
            ToolOutput::error("InvalidPath", "INVALID_PATH", format!("Error: {error}"))
        })
    }

    /// A permission prompt for this call.
    pub(crate) fn prompt(
        &self,
        kind: ToolKind,
        title: String,
        display: ToolDisplay,
    ) -> client::PermissionPrompt {
        client::PermissionPrompt {
            call_id: self.call_id.clone(),
            title,
            kind,
            display,
            raw_input: None,
            server_tool: None,
        }
    }

    /// The scope of a resolved path, for permission decisions.
    pub(crate) fn scope_of(resolved: &paths::Resolved) -> permission::Scope {
        if resolved.inside {
            permission::Scope::Workspace
        } else {
            permission::Scope::Outside
        }
    }
}

/// What a failed call means for the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolErrorKind {
    /// Told to the model, which may try something else; the turn goes on.
    Model,
    /// The call was cancelled (e.g. its permission prompt was dismissed): the turn stops after
    /// this step, as if cancelled.
    Cancelled,
    /// The turn cannot go on: the result is logged, then the turn ends as failed.
    Fatal,
}

/// Why a call failed: machine-readable name and code for the log, and what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolError {
    /// e.g. `UnknownTool`.
    pub(crate) name: String,
    /// e.g. `UNKNOWN_TOOL`.
    pub(crate) code: String,
    pub(crate) kind: ToolErrorKind,
}

/// An image a tool returned (an MCP server's image content): its base64 text as received.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolImage {
    pub(crate) mime_type: String,
    pub(crate) base64: String,
}

/// The result the model will see.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The text the model sees.
    pub text: String,
    pub(crate) is_error: bool,
    pub(crate) error: Option<ToolError>,
    /// What editors show besides the text (kept in the result's `meta`, not shown to the model).
    pub(crate) display: Box<ToolDisplay>,
    /// Images returned with the text: stored as blobs beside the log, given to a model that
    /// takes images, and shown in the editor.
    pub(crate) images: Vec<ToolImage>,
}

impl ToolOutput {
    pub(crate) fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            error: None,
            display: Box::default(),
            images: Vec::new(),
        }
    }

    /// A failure told to the model; the turn goes on.
    pub(crate) fn error(name: &str, code: &str, text: impl Into<String>) -> Self {
        Self::failure(name, code, ToolErrorKind::Model, text)
    }

    /// A failure after which the turn cannot go on.
    #[cfg(test)]
    pub(crate) fn fatal(name: &str, code: &str, text: impl Into<String>) -> Self {
        Self::failure(name, code, ToolErrorKind::Fatal, text)
    }

    fn failure(name: &str, code: &str, kind: ToolErrorKind, text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            error: Some(ToolError {
                name: name.into(),
                code: code.into(),
                kind,
            }),
            display: Box::default(),
            images: Vec::new(),
        }
    }

    fn error_kind(&self) -> Option<ToolErrorKind> {
        self.error.as_ref().map(|error| error.kind)
    }

    pub(crate) fn with_display(mut self, display: ToolDisplay) -> Self {
        self.display = Box::new(display);
        self
    }

    /// Shows `path` as `shown` in the text (errors name files the way the model wrote them,
    /// relative to the cwd, rather than as resolved absolute paths).
    pub(crate) fn relabel_path(mut self, path: &std::path::Path, shown: &str) -> Self {
        let absolute = path.display().to_string();
        if absolute != shown {
            self.text = self.text.replace(&absolute, shown);
        }
        self
    }

    /// Whether this is the result of a cancelled call.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.error_kind() == Some(ToolErrorKind::Cancelled)
    }

    /// Whether the turn must end (as failed) after this result.
    pub(crate) fn is_fatal(&self) -> bool {
        self.error_kind() == Some(ToolErrorKind::Fatal)
    }

    pub(crate) fn cancelled() -> Self {
        Self::failure(
            "Cancelled",
            "CANCELLED",
            ToolErrorKind::Cancelled,
            "Error: the tool call was cancelled",
        )
    }
}

/// Where a turn's tools work: the session's cwd, and, for a top-level session,
/// when its turn began (a tool that lists files it finds reads them again once per such turn;
/// a child's turn, `None`, uses what was read last).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpecScope<'a> {
    pub(crate) cwd: &'a std::path::Path,
    pub(crate) fresh_since: Option<std::time::Instant>,
}

pub(crate) trait Tool: Send + Sync {
    /// The name the model calls it by; by default the spec's (a tool whose spec is costly to
    /// build answers it directly).
    fn name(&self) -> String {
        self.spec().name
    }
    fn spec(&self) -> ToolSpec;
    /// What this tool found in `scope` for the session to know (the agent definitions
    /// `subagent` can run): sent with the session's workspace, not in the spec, so the specs
    /// stay the same in every session (and cacheable).
    fn workspace_note(&self, scope: SpecScope<'_>) -> Option<String> {
        let _ = scope;
        None
    }
    fn kind(&self) -> ToolKind;
    /// A short human title for this call, shown by editors.
    fn title(&self, arguments: &Value) -> String;
    /// Whether this call may run side by side with its neighbours of the same model step:
    /// true only for a call that changes nothing another call of the step could see (a read,
    /// a foreground child). By default a call runs alone.
    fn overlaps(&self, arguments: &Value) -> bool {
        let _ = arguments;
        false
    }
    /// Runs the call. Must return promptly once `cx.cancel` trips.
    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput>;
}

/// The tools of a session, kept sorted by name (the order they are offered to the model).
///
/// The by-name map is built on first use (kin answers `initialize` before any session needs
/// its tools) from each tool's name, without building its spec.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    /// In registration order; a later tool replaces an earlier one of the same name.
    tools: Vec<Arc<dyn Tool>>,
    by_name: OnceLock<BTreeMap<String, Arc<dyn Tool>>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.push(tool);
        self.by_name = OnceLock::new();
    }

    fn by_name(&self) -> &BTreeMap<String, Arc<dyn Tool>> {
        self.by_name.get_or_init(|| {
            let named = self.tools.iter();
            named.map(|tool| (tool.name(), tool.clone())).collect()
        })
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name().get(name)
    }

    /// The error for a call of `name`, which no tool has: the names there are, and the
    /// closest one.
    fn unknown(&self, name: &str) -> String {
        let names = self.by_name().keys().map(String::as_str);
        let hint = recover::closest(name, names.clone())
            .map_or_else(String::new, |close| format!(" Did you mean `{close}`?"));
        let list: Vec<&str> = names.collect();
        format!(
            "Error: unknown tool `{name}`.{hint} The tools are: {}.",
            list.join(", ")
        )
    }

    /// Keeps only the tools whose name satisfies `keep`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let mut by_name = self.by_name().clone();
        by_name.retain(|name, _| keep(name));
        self.tools = by_name.values().cloned().collect();
        self.by_name = OnceLock::from(by_name);
    }

    /// The specs of every tool, by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.by_name().values().map(|tool| tool.spec()).collect()
    }

    /// What the tools found for a session working in `scope` (see [`Tool::workspace_note`]),
    /// each note once.
    pub(crate) fn workspace_notes(&self, scope: SpecScope<'_>) -> Vec<String> {
        let mut notes: Vec<String> = Vec::new();
        for note in self
            .by_name()
            .values()
            .filter_map(|t| t.workspace_note(scope))
        {
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        notes
    }

    /// Whether call `name` with `arguments` (its JSON text) may overlap its neighbours; an
    /// unknown tool or arguments that do not parse run alone.
    pub(crate) fn overlaps(&self, name: &str, arguments: &str) -> bool {
        let Some(tool) = self.get(name) else {
            return false;
        };
        match serde_json::from_str::<Value>(arguments) {
            Ok(value @ Value::Object(_)) => tool.overlaps(&value),
            _ => false,
        }
    }

    /// Runs a call by name; unknown tools and unparsable arguments become error results.
    pub async fn call(&self, name: &str, arguments: &str, cx: ToolContext) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            return ToolOutput::error("UnknownTool", "UNKNOWN_TOOL", self.unknown(name));
        };
        // A raw newline inside a string is taken as the `\n` it means.
        let arguments = match crate::model::arguments::parse(arguments) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => {
                return ToolOutput::error(
                    "InvalidArguments",
                    "INVALID_ARGUMENTS",
                    "Error: tool arguments must be a JSON object",
                )
            }
            Err(error) => {
                return ToolOutput::error(
                    "InvalidArguments",
                    "INVALID_ARGUMENTS",
                    // The call goes back to the model with `{}` for its arguments.
                    format!(
                        "Error: tool arguments are not valid JSON: {error}. They were cut off \
                         or malformed (your call is shown with empty arguments); call the tool \
                         again with the complete arguments as one JSON object"
                    ),
                );
            }
        };
        // Tools settle by themselves once cancelled (killing processes, releasing terminals);
        // the call is never dropped half-way. Whatever they return then counts as cancelled.
        let cancel = cx.cancel.clone();
        let output = tool.call(arguments, cx).await;
        if cancel.is_cancelled() && !output.is_cancelled() {
            return ToolOutput::cancelled().with_display(*output.display);
        }
        output
    }
}

/// The built-in coding tools: `read`, `write`, `edit`, `glob`, `grep` and `bash`, and
/// `update_plan`; `bash` runs its commands unconfined.
pub fn builtin() -> ToolRegistry {
    builtin_with(shell::ShellTool::default())
}

/// [`builtin`], with `bash` starting its commands inside `sandbox`.
pub fn builtin_confined(sandbox: Arc<crate::process::sandbox::Sandbox>) -> ToolRegistry {
    builtin_with(shell::ShellTool::confined(sandbox))
}

fn builtin_with(shell: shell::ShellTool) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(read::ReadTool));
    registry.register(Arc::new(write::WriteTool));
    registry.register(Arc::new(edit::EditTool));
    registry.register(Arc::new(glob::GlobTool));
    registry.register(Arc::new(grep::GrepTool));
    registry.register(Arc::new(shell));
    registry.register(Arc::new(plan::PlanTool));
    registry
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::FutureExt;

    use super::*;

    /// A tool named `name` that counts how often its spec is built.
    struct Named {
        name: &'static str,
        description: &'static str,
        specs_built: Arc<AtomicUsize>,
    }

    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            self.specs_built.fetch_add(1, Ordering::SeqCst);
            ToolSpec {
                name: self.name.into(),
                description: self.description.into(),
                parameters: serde_json::json!({"type": "object"}).into(),
            }
        }
        fn kind(&self) -> ToolKind {
            ToolKind::Other
        }
        fn title(&self, _: &Value) -> String {
            self.name.into()
        }
        fn call(&self, _: Value, _: ToolContext) -> BoxFuture<'static, ToolOutput> {
            async { ToolOutput::cancelled() }.boxed()
        }
    }

    fn registry(tools: &[(&'static str, &'static str)]) -> (ToolRegistry, Arc<AtomicUsize>) {
        let specs_built = Arc::new(AtomicUsize::new(0));
        let mut registry = ToolRegistry::new();
        for &(name, description) in tools {
            registry.register(Arc::new(Named {
                name,
                description,
                specs_built: specs_built.clone(),
            }));
        }
        (registry, specs_built)
    }

    fn described(registry: &ToolRegistry) -> Vec<(String, String)> {
        let specs = registry.specs().into_iter();
        specs.map(|spec| (spec.name, spec.description)).collect()
    }

    #[test]
    fn registering_builds_no_spec_until_a_tool_is_looked_up() {
        let (registry, specs_built) = registry(&[("b", "B"), ("a", "A")]);
        assert_eq!(specs_built.load(Ordering::SeqCst), 0);
        assert!(registry.get("a").is_some());
        assert!(registry.get("c").is_none());
        // One spec per tool for the by-name map, built once.
        assert_eq!(specs_built.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn tools_are_offered_sorted_by_name_and_a_later_one_replaces_its_namesake() {
        let (mut registry, _) = registry(&[("b", "B"), ("a", "first A"), ("a", "second A")]);
        let expected = [("a", "second A"), ("b", "B")].map(|(n, d)| (n.into(), d.into()));
        assert_eq!(described(&registry), expected);
        // Registering after a lookup is seen by the next one.
        registry.register(registry.get("b").cloned().unwrap());
        let (extra, _) = self::registry(&[("c", "C")]);
        registry.register(extra.get("c").cloned().unwrap());
        assert_eq!(described(&registry).len(), 3);
        assert!(registry.get("c").is_some());
    }

    #[test]
    fn retain_keeps_only_the_chosen_names() {
        let (mut registry, _) = registry(&[("a", "A"), ("b", "B"), ("c", "C")]);
        registry.retain(|name| name != "b");
        let names: Vec<String> = described(&registry).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "c"]);
        assert!(registry.get("b").is_none());
        registry.register(registry.get("a").cloned().unwrap());
        assert_eq!(described(&registry).len(), 2);
    }
}
