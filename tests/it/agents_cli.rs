//! `kin agents`: the agent definitions of the current directory and of kin's config
//! directory, each with the file it came from, and a notice for each file that cannot be used.

use crate::common;

use std::process::Command;

#[test]
fn kin_agents_lists_the_definitions_with_their_files_and_notices() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let config = home.path().join("config");
    let write = |dir: std::path::PathBuf, file: &str, text: &str| {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
    };
    write(
        cwd.path().join(".kin/agents"),
        "reviewer.md",
        "---\ndescription: Reviews in this project\n---\nReview.\n",
    );
    write(
        cwd.path().join(".claude/agents"),
        "explorer.md",
        "---\nname: explorer\ndescription: Explores\ntools: Read, Grep\n---\n",
    );
    write(
        config.join("kin/agents"),
        "reviewer.md",
        "---\ndescription: The user's reviewer\n---\n",
    );
    write(config.join("kin/agents"), "broken.md", "no front matter\n");
    let output = Command::new(common::kin_binary())
        .arg("agents")
        .env("KIN_HOME", home.path())
        .env("XDG_CONFIG_HOME", &config)
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let workspace = cwd.path().canonicalize().unwrap();
    let user = config.canonicalize().unwrap();
    let expected = format!(
        "reviewer: Reviews in this project\n  from {ws}/.kin/agents/reviewer.md\n\
         explorer: Explores\n  from {ws}/.claude/agents/explorer.md\n\
         notice: {user}/kin/agents/broken.md: no YAML front matter (a `---` block at the top)\n",
        ws = workspace.display(),
        user = user.display(),
    );
    assert_eq!(stdout, expected);
}

#[test]
fn a_definition_symlinked_out_of_the_workspace_is_refused_and_a_fifo_never_blocks() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.md");
    std::fs::write(&secret, "---\ndescription: OUTSIDE-SECRET\n---\nLeaked.\n").unwrap();
    let agents = cwd.path().join(".kin/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::os::unix::fs::symlink(&secret, agents.join("leak.md")).unwrap();
    nix::unistd::mkfifo(&agents.join("pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(
        agents.join("fine.md"),
        "---\ndescription: A fine agent\n---\nWork.\n",
    )
    .unwrap();
    let output = Command::new(common::kin_binary())
        .arg("agents")
        .env("KIN_HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("fine: A fine agent"), "{stdout}");
    assert!(!stdout.contains("OUTSIDE-SECRET"), "{stdout}");
    assert!(
        stdout.contains("leak.md: cannot be read") && stdout.contains("pipe.md: cannot be read"),
        "{stdout}"
    );
}

/// A definition nested 100,000 deep (200 KB, under the size cap) is refused before YAML's
/// parser sees it (which takes time growing with the square of the depth); the others load.
#[test]
fn a_definition_nested_deep_is_refused_unparsed() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let agents = cwd.path().join(".kin/agents");
    std::fs::create_dir_all(&agents).unwrap();
    let deep = format!(
        "---\ndescription: deep\ntools: {}x{}\n---\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(agents.join("deep.md"), deep).unwrap();
    std::fs::write(agents.join("fine.md"), "---\ndescription: Fine\n---\n").unwrap();
    let output = Command::new(common::kin_binary())
        .arg("agents")
        .env("KIN_HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("fine: Fine"), "{stdout}");
    assert!(
        stdout.contains("deep.md: the front matter nests more than 64 levels deep"),
        "{stdout}"
    );
}
