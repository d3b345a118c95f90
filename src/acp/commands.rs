//! Slash commands: the built-ins kin runs itself, and user commands — Markdown files in the
//! workspace's `.kin/commands/`, kin's config directory's `commands/`, and the workspace's
//! `.claude/commands/` (read for compatibility). The first place to define a name wins, and a
//! user command never hides a built-in.
//!
//! A command file may open with front matter (`description:`, `argument-hint:` between `---`
//! lines); its body is the prompt, with `$ARGUMENTS` replaced by what follows the name.
//!
//! The workspace's files are the repository's, not the user's: they are read as the tools read
//! (confined beneath the session's roots, so a symlink leading out is refused; regular files
//! only, never blocking on a FIFO; capped in size and number). The config directory's are the
//! user's own, and read by name.

use std::path::{Path, PathBuf};

use crate::tools::private::PrivateFiles;
use crate::tools::Roots;

/// Bytes of one command file read at most; a longer file is not a command.
const MAX_COMMAND_BYTES: u64 = 64 * 1024;
/// Command files read at most from one directory.
const MAX_COMMANDS_PER_DIR: usize = 256;

use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, UnstructuredCommandInput,
};

/// A command kin runs itself, without the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    /// This session's children and their state.
    Agents,
    /// Switches the permission mode.
    Mode,
    /// Shows or switches the session's model.
    Model,
    /// Compacts the conversation now.
    Compact,
}

/// The built-ins: name, what it does, the hint for its input. (`/model` and `/compact` are
/// one entry each here and one arm in `prompt::run_builtin`.)
const BUILTINS: &[(Builtin, &str, &str, Option<&str>)] = &[
    (
        Builtin::Agents,
        "agents",
        "List this session's subagents and their state",
        None,
    ),
    (
        Builtin::Mode,
        "mode",
        "Switch the permission mode",
        Some("<mode id>"),
    ),
    (
        Builtin::Model,
        "model",
        "Show the configured models, or switch this session to one",
        Some("<model id>"),
    ),
    (
        Builtin::Compact,
        "compact",
        "Summarise the conversation so far to free context",
        None,
    ),
];

/// A user command read from a Markdown file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserCommand {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) hint: Option<String>,
    pub(crate) body: String,
}

/// What a prompt's leading `/name args` is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Invoked<'a> {
    Builtin(Builtin, &'a str),
    User(&'a UserCommand, &'a str),
}

/// The commands of one session, as found now.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Commands {
    pub(crate) user: Vec<UserCommand>,
}

/// The directories user commands are read from, first wins, each with whether it is kin's
/// config directory (read by name; the others are read confined beneath the session's roots).
pub(crate) fn dirs(cwd: &Path, config_dir: Option<&Path>) -> Vec<(PathBuf, bool)> {
    let mut dirs = vec![(cwd.join(".kin/commands"), false)];
    dirs.extend(config_dir.map(|dir| (dir.join("commands"), true)));
    dirs.push((cwd.join(".claude/commands"), false));
    dirs
}

impl Commands {
    /// Reads the user commands in `dirs`, the workspace's confined beneath `roots`, none from
    /// kin's own files (`private`). Unreadable directories and files are skipped. Blocking: for
    /// `spawn_blocking`.
    pub(crate) fn load(dirs: &[(PathBuf, bool)], roots: &Roots, private: &PrivateFiles) -> Self {
        let mut user: Vec<UserCommand> = Vec::new();
        for (dir, trusted) in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let confine = (!trusted).then_some(roots);
            let mut found: Vec<UserCommand> = entries
                .flatten()
                .take(MAX_COMMANDS_PER_DIR)
                .filter_map(|entry| read_command(&entry.path(), confine, private))
                .collect();
            found.sort_by(|a, b| a.name.cmp(&b.name));
            for command in found {
                let taken = user.iter().any(|c| c.name == command.name)
                    || BUILTINS.iter().any(|(_, name, ..)| *name == command.name);
                if !taken {
                    user.push(command);
                }
            }
        }
        user.sort_by(|a, b| a.name.cmp(&b.name));
        Self { user }
    }

    /// The `available_commands_update` list: built-ins first, then user commands.
    pub(crate) fn available(&self) -> Vec<AvailableCommand> {
        let input = |hint: &str| {
            AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint.to_owned()))
        };
        let builtins = BUILTINS.iter().map(|(_, name, description, hint)| {
            AvailableCommand::new(*name, *description).input(hint.map(input))
        });
        let user = self.user.iter().map(|c| {
            AvailableCommand::new(c.name.clone(), c.description.clone())
                .input(c.hint.as_deref().map(input))
        });
        builtins.chain(user).collect()
    }

    /// The command a prompt's text invokes, if it starts with a known `/name`.
    pub(crate) fn invoked<'a>(&'a self, text: &'a str) -> Option<Invoked<'a>> {
        let rest = text.trim_start().strip_prefix('/')?;
        let (name, args) = match rest.find(char::is_whitespace) {
            Some(at) => (&rest[..at], rest[at..].trim()),
            None => (rest, ""),
        };
        if let Some((builtin, ..)) = BUILTINS.iter().find(|(_, n, ..)| *n == name) {
            return Some(Invoked::Builtin(*builtin, args));
        }
        let command = self.user.iter().find(|c| c.name == name)?;
        Some(Invoked::User(command, args))
    }
}

impl UserCommand {
    /// The prompt this command expands to with `args`.
    pub(crate) fn expand(&self, args: &str) -> String {
        if self.body.contains("$ARGUMENTS") {
            self.body.replace("$ARGUMENTS", args)
        } else if args.is_empty() {
            self.body.clone()
        } else {
            format!("{}\n\n{args}", self.body)
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// A command from `path`, if it is a readable `<name>.md` text file with a usable name, within
/// the size cap; opened confined beneath `confine` when given.
fn read_command(
    path: &Path,
    confine: Option<&Roots>,
    private: &PrivateFiles,
) -> Option<UserCommand> {
    if path.extension()? != "md" {
        return None;
    }
    let name = path.file_stem()?.to_str()?.to_owned();
    if !valid_name(&name) {
        return None;
    }
    let (bytes, cut) = crate::tools::fs::read_capped(confine, private, path, MAX_COMMAND_BYTES)
        .inspect_err(|error| tracing::debug!("command file skipped: {error}"))
        .ok()?;
    if cut || bytes.contains(&0) {
        tracing::debug!(
            "command file skipped: {} is too large or not text",
            path.display()
        );
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    let (front, body) = split_front_matter(&text);
    let field = |key: &str| {
        front.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
            (k.trim() == key && !v.is_empty()).then(|| v.to_owned())
        })
    };
    let body = body.trim().to_owned();
    let description = field("description").unwrap_or_else(|| {
        let first = body.lines().next().unwrap_or_default();
        first.chars().take(80).collect()
    });
    Some(UserCommand {
        hint: field("argument-hint"),
        description,
        body,
        name,
    })
}

/// `(front matter, body)`; the front matter is empty when the file has none.
fn split_front_matter(text: &str) -> (&str, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return ("", text);
    };
    match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            let body = after.split_once('\n').map_or("", |(_, body)| body);
            (&rest[..end], body)
        }
        None => ("", text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_first_place_wins_and_expand_their_arguments() {
        let cwd = tempfile::tempdir().unwrap();
        let kin = cwd.path().join(".kin/commands");
        let claude = cwd.path().join(".claude/commands");
        std::fs::create_dir_all(&kin).unwrap();
        std::fs::create_dir_all(&claude).unwrap();
        std::fs::write(
            kin.join("review.md"),
            "---\ndescription: Review a file\nargument-hint: <path>\n---\nReview $ARGUMENTS carefully.\n",
        )
        .unwrap();
        std::fs::write(claude.join("review.md"), "Other review").unwrap();
        std::fs::write(claude.join("fix.md"), "Fix the bug").unwrap();
        std::fs::write(claude.join("agents.md"), "hides nothing").unwrap();
        std::fs::write(claude.join("notes.txt"), "not a command").unwrap();
        let roots = Roots::new(cwd.path().to_owned(), Vec::new());
        let commands = Commands::load(&dirs(cwd.path(), None), &roots, &PrivateFiles::default());
        let names: Vec<&str> = commands.user.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["fix", "review"]);
        let Some(Invoked::User(review, args)) = commands.invoked("/review src/a.rs") else {
            panic!("review is a user command");
        };
        assert_eq!(review.description, "Review a file");
        assert_eq!(review.hint.as_deref(), Some("<path>"));
        assert_eq!(review.expand(args), "Review src/a.rs carefully.");
        let Some(Invoked::User(fix, args)) = commands.invoked("/fix now") else {
            panic!("fix is a user command");
        };
        assert_eq!(fix.expand(args), "Fix the bug\n\nnow");
        assert_eq!(
            commands.invoked("/mode yolo"),
            Some(Invoked::Builtin(Builtin::Mode, "yolo"))
        );
        assert_eq!(commands.invoked("/unknown x"), None);
        assert_eq!(commands.invoked("no slash"), None);
        assert_eq!(commands.available().len(), 6);
    }
}
