//! Agent definitions: Markdown files whose YAML front matter names a kind of child (`name`,
//! `description`, `tools`, `model`, `permission`, `timeout`, `budget`, `isolation`) and whose
//! body is that child's instructions. Read from the workspace (`.kin/agents/`, then Claude
//! Code's `.claude/agents/`) and from `agents/` in kin's config directory; the first
//! definition of a name wins, so the workspace's beat the user's. A file that cannot be used
//! is skipped with a notice; it never fails a session.
//!
//! The workspace's files are read as the tools read (confined beneath the workspace, so a
//! symlink leading out is refused; regular files only, never blocking on a FIFO; capped in
//! size and number), off the runtime's workers; the config directory's are read by name.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::agent::host::AgentHost;
use crate::agent::shape::SessionShape;
use crate::agent::DEFAULT_PERSONA;
use crate::sync::{lock, off_the_workers};
use crate::tools::private::PrivateFiles;
use crate::tools::{PermissionMode, Roots};

/// Bytes of one definition read at most; a longer file is skipped with a notice.
const MAX_DEFINITION_BYTES: u64 = 256 * 1024;
/// Definition files read at most from one directory.
const MAX_DEFINITIONS_PER_DIR: usize = 256;
/// The deepest front matter parsed: YAML's parser takes time growing with the square of the
/// nesting, so a small file nested deep would stall every turn; no definition needs more.
const MAX_FRONT_MATTER_DEPTH: usize = 64;

/// One usable agent definition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentDefinition {
    pub(crate) name: String,
    pub(crate) description: String,
    /// The only tools the child may use; `None` keeps all of them.
    pub(crate) tools: Option<Vec<String>>,
    /// The configured model to run on; `None` runs on the caller's.
    pub(crate) model: Option<String>,
    /// The child's permission mode, never wider than its parent's.
    pub(crate) permission: Option<PermissionMode>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) budget_tokens: Option<u64>,
    /// How the child is isolated (`worktree`), if at all.
    pub(crate) isolation: Option<String>,
    /// The body: added to the child's instructions.
    pub(crate) instructions: String,
    /// The file it was read from.
    pub(crate) source: PathBuf,
}

/// The definitions found for one workspace, and what was wrong with the files that were not
/// (or not fully) used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentCatalog {
    pub(crate) agents: Vec<AgentDefinition>,
    pub(crate) notices: Vec<String>,
}

/// Why a definition file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum DefinitionError {
    #[error("{path}: no YAML front matter (a `---` block at the top)")]
    NoFrontMatter { path: String },
    #[error(
        "{path}: the front matter nests more than {MAX_FRONT_MATTER_DEPTH} levels deep; it \
         was not parsed"
    )]
    TooDeep { path: String },
    #[error("{path}: the front matter is not valid YAML: {message}")]
    Yaml { path: String, message: String },
    #[error("{path}: `{field}` {message}")]
    Field {
        path: String,
        field: &'static str,
        message: String,
    },
}

/// The directories definitions are read from, first wins, each with whether it is kin's
/// config directory (read by name; the others are read confined beneath the workspace).
pub(crate) fn dirs(cwd: &Path, config_dir: Option<&Path>) -> Vec<(PathBuf, bool)> {
    let mut dirs = vec![
        (cwd.join(".kin/agents"), false),
        (cwd.join(".claude/agents"), false),
    ];
    dirs.extend(config_dir.map(|dir| (dir.join("agents"), true)));
    dirs
}

/// The definitions for a session whose cwd is `cwd`, with kin's config directory from the
/// process environment; none read from kin's own files, `private`.
pub fn load_for(cwd: &Path, private: &PrivateFiles) -> AgentCatalog {
    let config_dir = crate::config::config_dir(&crate::config::process_env);
    let dirs = dirs(cwd, config_dir.as_deref());
    // Most workspaces have none of these directories: no hand-off of the worker for that.
    if !dirs.iter().any(|(dir, _)| dir.is_dir()) {
        return AgentCatalog::default();
    }
    let workspace = Roots::new(cwd.to_owned(), Vec::new());
    off_the_workers(|| AgentCatalog::load(&dirs, &workspace, private))
}

/// The catalogs read so far, by workspace, with when each was read. A top-level turn reads
/// its workspace's definitions again once (so a file added or edited between prompts counts
/// from the next one, and the turn's delegating tools share one read); a child's turn uses
/// what was last read for its workspace, which spares every child of a tree the directory
/// reads.
#[derive(Debug, Default)]
pub(crate) struct Catalogs {
    by_cwd: Mutex<HashMap<PathBuf, (Instant, Arc<AgentCatalog>)>>,
}

impl Catalogs {
    /// The definitions for a session in `cwd`: the last read if it was made at or after
    /// `fresh_since` (any last read when `None`), else a new one (none read from `private`).
    pub(crate) fn get(
        &self,
        cwd: &Path,
        fresh_since: Option<Instant>,
        private: &PrivateFiles,
    ) -> Arc<AgentCatalog> {
        if let Some((read_at, catalog)) = lock(&self.by_cwd).get(cwd) {
            if fresh_since.is_none_or(|since| *read_at >= since) {
                return catalog.clone();
            }
        }
        let read_at = Instant::now();
        let catalog = Arc::new(load_for(cwd, private));
        lock(&self.by_cwd).insert(cwd.to_owned(), (read_at, catalog.clone()));
        catalog
    }
}

impl AgentCatalog {
    /// Reads every `*.md` file of `dirs` (missing directories are skipped), in name order; the
    /// untrusted ones confined beneath `workspace`; none of kin's own files (`private`). Blocking.
    pub(crate) fn load(
        dirs: &[(PathBuf, bool)],
        workspace: &Roots,
        private: &PrivateFiles,
    ) -> Self {
        let mut catalog = Self::default();
        let mut seen = BTreeSet::new();
        for (dir, trusted) in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries
                .flatten()
                .take(MAX_DEFINITIONS_PER_DIR)
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
                .collect();
            paths.sort();
            let confine = (!trusted).then_some(workspace);
            for path in paths {
                let text = match read_definition(confine, private, &path) {
                    Ok(text) => text,
                    Err(why) => {
                        catalog
                            .notices
                            .push(format!("{}: cannot be read: {why}", path.display()));
                        continue;
                    }
                };
                match parse(&path, &text) {
                    Ok((definition, notices)) => {
                        catalog.notices.extend(notices);
                        if seen.insert(definition.name.clone()) {
                            catalog.agents.push(definition);
                        }
                    }
                    Err(error) => catalog.notices.push(error.to_string()),
                }
            }
        }
        catalog
    }

    pub(crate) fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.iter().find(|agent| agent.name == name)
    }

    /// The listing `kin agents` prints: each definition and its file, then the notices.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if self.agents.is_empty() {
            text.push_str("no agent definitions\n");
        }
        for agent in &self.agents {
            text.push_str(&format!(
                "{}: {}\n  from {}\n",
                agent.name,
                agent.description,
                agent.source.display()
            ));
        }
        for notice in &self.notices {
            text.push_str(&format!("notice: {notice}\n"));
        }
        text
    }

    /// The names of the usable definitions, comma-separated (for an error).
    pub(crate) fn names(&self) -> String {
        let names: Vec<&str> = self.agents.iter().map(|a| a.name.as_str()).collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

/// The text of the definition file at `path`, within the size cap.
fn read_definition(
    confine: Option<&Roots>,
    private: &PrivateFiles,
    path: &Path,
) -> Result<String, String> {
    let (bytes, cut) = crate::tools::fs::read_capped(confine, private, path, MAX_DEFINITION_BYTES)
        .map_err(|error| error.to_string())?;
    if cut {
        return Err(format!("it is over {MAX_DEFINITION_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())
}

/// Narrows `definition` to what this kin has: a model that is not configured is dropped (the
/// session runs on the caller's), and each tool is kept under kin's name (Claude Code's
/// `Read` is kin's `read`) or left out. The notices say what was dropped.
pub(crate) fn fit(
    definition: &mut AgentDefinition,
    model_known: impl Fn(&str) -> bool,
    tool_known: impl Fn(&str) -> bool,
) -> Vec<String> {
    let shown = definition.source.display().to_string();
    let mut notices = Vec::new();
    if let Some(model) = &definition.model {
        if !model_known(model) {
            notices.push(format!(
                "{shown}: model `{model}` is not configured; the child runs on yours"
            ));
            definition.model = None;
        }
    }
    if let Some(tools) = definition.tools.take() {
        let mut kept = Vec::new();
        for tool in tools {
            // MCP servers come and go: their tools are kept by the name the model sees
            // (`mcp__server__tool`) or by server (`mcp__server`), unchecked.
            if tool.starts_with(crate::mcp::MCP_PREFIX) {
                kept.push(tool);
                continue;
            }
            match [tool.clone(), tool.to_lowercase()]
                .into_iter()
                .find(|name| tool_known(name))
            {
                Some(name) => kept.push(name),
                None => notices.push(format!(
                    "{shown}: tool `{tool}` is not a kin tool; left out"
                )),
            }
        }
        definition.tools = Some(kept);
    }
    notices
}

/// No definition of that name is usable.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("unknown agent {name:?}; the defined agents are: {available}")]
pub(crate) struct UnknownAgent {
    pub(crate) name: String,
    /// The usable names, comma-separated (`none`).
    pub(crate) available: String,
}

/// The definition `name` for a session in `cwd`, fitted to what `host` has (see [`fit`]; the
/// notices are logged).
pub(crate) fn find(
    host: &AgentHost,
    name: &str,
    cwd: &Path,
) -> Result<AgentDefinition, UnknownAgent> {
    let catalog = load_for(cwd, host.private());
    let Some(found) = catalog.get(name) else {
        return Err(UnknownAgent {
            name: name.to_owned(),
            available: catalog.names(),
        });
    };
    let mut definition = found.clone();
    let notices = fit(
        &mut definition,
        |model| host.models().lookup(model).is_ok(),
        |tool| host.tools().get(tool).is_some(),
    );
    for notice in &notices {
        tracing::warn!(agent = name, "{notice}");
    }
    Ok(definition)
}

impl AgentDefinition {
    /// What the definition makes of a top-level session: kin's persona followed by its
    /// instructions, its tools, and its permission as the ceiling.
    pub(crate) fn shape(&self) -> SessionShape {
        SessionShape {
            persona: (!self.instructions.is_empty())
                .then(|| format!("{DEFAULT_PERSONA}\n\n{}", self.instructions)),
            tools: self.tools.clone(),
            ceiling: self.permission,
        }
    }
}

/// The front matter as written; anything else is reported and ignored.
#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    tools: Option<Value>,
    model: Option<String>,
    permission: Option<String>,
    timeout: Option<Value>,
    budget: Option<Value>,
    isolation: Option<String>,
    #[serde(flatten)]
    other: serde_yaml_ng::Mapping,
}

/// Claude Code's fields that kin has no use for (ignored without a notice).
const CLAUDE_ONLY: [&str; 2] = ["color", "permissionMode"];

/// Parses one definition file; the notices name the fields it ignored.
pub(crate) fn parse(
    path: &Path,
    text: &str,
) -> Result<(AgentDefinition, Vec<String>), DefinitionError> {
    let shown = path.display().to_string();
    let (front, body) = split_front_matter(text).ok_or_else(|| DefinitionError::NoFrontMatter {
        path: shown.clone(),
    })?;
    if nesting_bound(front) > MAX_FRONT_MATTER_DEPTH {
        return Err(DefinitionError::TooDeep { path: shown });
    }
    let front: FrontMatter = match front.trim() {
        "" => serde_yaml_ng::from_str("{}"),
        yaml => serde_yaml_ng::from_str(yaml),
    }
    .map_err(|e| DefinitionError::Yaml {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let field = |field: &'static str, message: &str| DefinitionError::Field {
        path: shown.clone(),
        field,
        message: message.to_owned(),
    };
    let name = match front.name {
        Some(name) => name.trim().to_owned(),
        // Unnamed: the file's stem names it.
        None => path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or_default()
            .to_owned(),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(field("name", "must be letters, digits, `-` or `_`"));
    }
    let description = front
        .description
        .map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty())
        .ok_or_else(|| field("description", "is required"))?;
    let tools = match front.tools {
        None | Some(Value::Null) => None,
        Some(Value::String(list)) => Some(split_list(&list)),
        Some(Value::Sequence(items)) => Some(
            items
                .into_iter()
                .map(|item| match item {
                    Value::String(tool) => Ok(tool.trim().to_owned()),
                    _ => Err(field("tools", "must list tool names")),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(field(
                "tools",
                "must be a list or a comma-separated string of tool names",
            ))
        }
    };
    // Claude Code's `inherit` is kin's default: the caller's model.
    let model = front
        .model
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty() && m != "inherit");
    let permission = match front.permission.as_deref().map(str::trim) {
        None => None,
        Some(id) => Some(
            PermissionMode::from_id(id)
                .ok_or_else(|| field("permission", "must be ask, allow or read-only"))?,
        ),
    };
    let timeout = match front.timeout {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_f64()
                .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| field("timeout", "must be a positive number of seconds"))?,
        ),
        Some(Value::String(text)) => Some(
            crate::config::parse_duration(&text)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| field("timeout", "must be seconds or a duration like \"5m\""))?,
        ),
        Some(_) => {
            return Err(field(
                "timeout",
                "must be seconds or a duration like \"5m\"",
            ))
        }
    };
    let budget_tokens = match front.budget {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .filter(|&n| n > 0)
                .ok_or_else(|| field("budget", "must be a positive number of tokens"))?,
        ),
    };
    let isolation = match front.isolation.as_deref().map(str::trim) {
        None | Some("none") => None,
        Some("worktree") => Some("worktree".to_owned()),
        Some(_) => return Err(field("isolation", "must be worktree or none")),
    };
    let notices = front
        .other
        .keys()
        .map(|key| match key {
            Value::String(key) => key.clone(),
            other => format!("{other:?}"),
        })
        .filter(|key| !CLAUDE_ONLY.contains(&key.as_str()))
        .map(|key| format!("{shown}: unknown field `{key}` ignored"))
        .collect();
    let definition = AgentDefinition {
        name,
        description,
        tools,
        model,
        permission,
        timeout,
        budget_tokens,
        isolation,
        instructions: body.trim().to_owned(),
        source: path.to_owned(),
    };
    Ok((definition, notices))
}

/// An upper bound on how deep `yaml` nests, found in one pass: for each line, its
/// indentation, the block indicators (`- `, `? `, `: `) that open it, and the flow brackets
/// (`[`, `{`) still open there. Quotes are not looked into, so a bracket in a string counts.
fn nesting_bound(yaml: &str) -> usize {
    let mut flow = 0usize;
    let mut deepest = 0;
    for line in yaml.lines() {
        let text = line.trim_start_matches(' ');
        let indent = line.len() - text.len();
        let mut rest = text;
        let mut indicators = 0;
        while let Some(after) = ["- ", "? ", ": "]
            .iter()
            .find_map(|indicator| rest.strip_prefix(indicator))
        {
            indicators += 1;
            rest = after.trim_start_matches(' ');
        }
        let mut widest = flow;
        for byte in rest.bytes() {
            match byte {
                b'[' | b'{' => {
                    flow += 1;
                    widest = widest.max(flow);
                }
                b']' | b'}' => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        deepest = deepest.max(indent + indicators + widest);
    }
    deepest
}

/// `a, b ,c` as `[a, b, c]`.
fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|tool| !tool.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `(front matter, body)`, or `None` when the file does not open with a `---` block.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    if let Some(body) = rest.strip_prefix("---") {
        return Some(("", body));
    }
    let end = rest.find("\n---")?;
    let after = &rest[end + 4..];
    let body = after
        .strip_prefix("\r\n")
        .or_else(|| after.strip_prefix('\n'))
        .unwrap_or(after);
    Some((&rest[..end], body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<(AgentDefinition, Vec<String>), DefinitionError> {
        parse(Path::new("/x/reviewer.md"), text)
    }

    #[test]
    fn a_child_turn_uses_what_the_last_top_level_turn_read() {
        let cwd = tempfile::tempdir().unwrap();
        let dir = cwd.path().join(".kin/agents");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str| {
            let text = format!("---\nname: {name}\ndescription: d\n---\nbody\n");
            std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
        };
        let names = |catalog: &AgentCatalog| -> Vec<String> {
            // Only this workspace's: the user's config directory may hold others.
            let ours = catalog.agents.iter().filter(|a| a.source.starts_with(&dir));
            ours.map(|a| a.name.clone()).collect()
        };
        let catalogs = Catalogs::default();
        let none = PrivateFiles::default();
        write("first");
        assert_eq!(names(&catalogs.get(cwd.path(), None, &none)), ["first"]);
        write("second");
        assert_eq!(names(&catalogs.get(cwd.path(), None, &none)), ["first"]);
        let turn = Some(Instant::now());
        assert_eq!(
            names(&catalogs.get(cwd.path(), turn, &none)),
            ["first", "second"]
        );
        // The same turn's other tools share that read.
        write("third");
        assert_eq!(
            names(&catalogs.get(cwd.path(), turn, &none)),
            ["first", "second"]
        );
        assert_eq!(
            names(&catalogs.get(cwd.path(), None, &none)),
            ["first", "second"]
        );
        let next_turn = Some(Instant::now());
        assert_eq!(
            names(&catalogs.get(cwd.path(), next_turn, &none)),
            ["first", "second", "third"]
        );
    }

    #[test]
    fn kin_fields_are_read() {
        let (agent, notices) = parsed(
            "---\nname: reviewer\ndescription: Reviews diffs\ntools: [read, grep]\nmodel: fast\n\
             permission: read-only\ntimeout: 2m\nbudget: 5000\nisolation: worktree\n---\nBe terse.\n",
        )
        .unwrap();
        assert!(notices.is_empty());
        assert_eq!(agent.name, "reviewer");
        assert_eq!(agent.tools, Some(vec!["read".into(), "grep".into()]));
        assert_eq!(agent.model.as_deref(), Some("fast"));
        assert_eq!(agent.permission, Some(PermissionMode::ReadOnly));
        assert_eq!(agent.timeout, Some(Duration::from_secs(120)));
        assert_eq!(agent.budget_tokens, Some(5000));
        assert_eq!(agent.isolation.as_deref(), Some("worktree"));
        assert_eq!(agent.instructions, "Be terse.");
    }

    #[test]
    fn claude_fields_map_and_unknown_ones_are_noticed() {
        let (agent, notices) = parsed(
            "---\nname: r\ndescription: d\ntools: Read, Grep , bash\nmodel: inherit\ncolor: red\nfoo: 1\n---\nbody",
        )
        .unwrap();
        assert_eq!(
            agent.tools,
            Some(vec!["Read".into(), "Grep".into(), "bash".into()])
        );
        assert_eq!(agent.model, None);
        assert_eq!(notices, ["/x/reviewer.md: unknown field `foo` ignored"]);
    }

    #[test]
    fn bad_definitions_say_what_is_wrong() {
        let missing = parsed("no front matter").unwrap_err();
        assert!(missing.to_string().contains("no YAML front matter"));
        let yaml = parsed("---\nname: [unclosed\n---\n").unwrap_err();
        assert!(matches!(yaml, DefinitionError::Yaml { .. }));
        let mode = parsed("---\ndescription: d\npermission: root\n---\n").unwrap_err();
        assert_eq!(
            mode.to_string(),
            "/x/reviewer.md: `permission` must be ask, allow or read-only"
        );
        let no_description = parsed("---\nname: r\n---\n").unwrap_err();
        assert!(no_description
            .to_string()
            .contains("`description` is required"));
    }

    #[test]
    fn deep_front_matter_is_refused_before_it_is_parsed() {
        let deep = |tools: String| format!("---\ndescription: d\ntools:\n  {tools}\n---\n");
        let cases = [
            format!("{}x{}", "[".repeat(100_000), "]".repeat(100_000)),
            format!("{}x{}", "{a: ".repeat(100_000), "}".repeat(100_000)),
            format!("{}x", "- ".repeat(100_000)),
        ];
        for tools in cases {
            let error = parsed(&deep(tools)).unwrap_err();
            assert!(matches!(error, DefinitionError::TooDeep { .. }), "{error}");
        }
        let indented: String = (0..100)
            .map(|n| format!("{}k{n}:\n", " ".repeat(n)))
            .collect();
        let error = parsed(&format!("---\n{indented}---\n")).unwrap_err();
        assert!(matches!(error, DefinitionError::TooDeep { .. }), "{error}");
        let fine = "---\ndescription: d\ntools: [[a, {b: [c]}]]\nx:\n  - - y\n---\n";
        assert!(!matches!(
            parsed(fine),
            Err(DefinitionError::TooDeep { .. })
        ));
    }

    #[test]
    fn the_first_directory_wins_by_name() {
        let workspace = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(workspace.path().join(".kin/agents")).unwrap();
        std::fs::create_dir_all(user.path().join("agents")).unwrap();
        let write = |path: PathBuf, description: &str| {
            std::fs::write(path, format!("---\ndescription: {description}\n---\n")).unwrap()
        };
        write(workspace.path().join(".kin/agents/a.md"), "workspace");
        write(user.path().join("agents/a.md"), "user");
        write(user.path().join("agents/b.md"), "user b");
        std::fs::write(user.path().join("agents/bad.md"), "nothing").unwrap();
        // A workspace file leading out of the workspace is not followed.
        write(user.path().join("secret.md"), "outside");
        std::os::unix::fs::symlink(
            user.path().join("secret.md"),
            workspace.path().join(".kin/agents/c.md"),
        )
        .unwrap();
        let roots = Roots::new(workspace.path().to_owned(), Vec::new());
        let dirs = dirs(workspace.path(), Some(user.path()));
        let catalog = AgentCatalog::load(&dirs, &roots, &PrivateFiles::default());
        let found: Vec<(&str, &str)> = catalog
            .agents
            .iter()
            .map(|a| (a.name.as_str(), a.description.as_str()))
            .collect();
        assert_eq!(found, [("a", "workspace"), ("b", "user b")]);
        assert_eq!(catalog.notices.len(), 2, "{:?}", catalog.notices);
        assert!(catalog.notices[0].contains("c.md: cannot be read"));
    }
}
