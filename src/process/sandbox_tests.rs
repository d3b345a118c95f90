//! The sandbox's policies and launches, for a kernel the tests pretend to have.

use super::*;

fn landlock(settings: SandboxSettings, ceiling: Option<Policy>) -> Sandbox {
    Sandbox::new(
        settings,
        Support::Landlock {
            abi: 6,
            network: true,
        },
        Some("/kin".into()),
        ceiling,
    )
}

fn scope(root: &Path, read_only: bool) -> CommandScope<'_> {
    CommandScope {
        session: "s1",
        roots: vec![root.to_owned()],
        read_only,
    }
}

#[test]
fn commands_write_the_roots_the_temp_dir_and_configured_paths() {
    let ws = tempfile::tempdir().unwrap();
    let root = canonical(ws.path());
    let cache = canonical(&std::env::temp_dir()).join(format!("kin-cache-{}", std::process::id()));
    let sandbox = landlock(
        SandboxSettings {
            writable: vec![cache.clone()],
            ..SandboxSettings::default()
        },
        None,
    );
    let launch = sandbox
        .command(&scope(&root, false), "bash", &["-c".into(), "x".into()])
        .unwrap();
    let policy = launch.policy.clone().unwrap();
    assert!(policy.network);
    assert_eq!(policy.writable[1..], [root.clone(), cache.clone()]);
    // Missing, it was made (0700) to be writable.
    assert!(cache.is_dir());
    std::fs::remove_dir(&cache).unwrap();
    let temp = &policy.writable[0];
    assert!(temp.is_dir() && temp.ends_with("s1"), "{}", temp.display());
    assert_eq!(launch.program, "/kin");
    assert_eq!(launch.args[0], "sandbox-exec");
    assert_eq!(launch.args[4..], ["bash", "-c", "x"]);
    assert!(launch
        .env
        .contains(&("TMPDIR".into(), temp.to_string_lossy().into())));
    // Read-only: the temp dir alone, no network.
    let policy = sandbox
        .command_policy(&scope(&root, true))
        .unwrap()
        .unwrap();
    assert_eq!(policy.writable, std::slice::from_ref(temp));
    assert!(!policy.network);
    let base = temp.parent().unwrap().to_owned();
    drop(sandbox);
    assert!(!base.exists(), "the private temp dirs are removed");
}

#[test]
fn a_ceiling_narrows_what_commands_and_children_may_do() {
    let ws = tempfile::tempdir().unwrap();
    let root = canonical(ws.path());
    let ceiling = Policy {
        writable: vec![root.join("sub"), "/elsewhere".into()],
        network: false,
        required: false,
        unreadable: vec!["/secret".into()],
    };
    let sandbox = landlock(SandboxSettings::default(), Some(ceiling.clone()));
    let policy = sandbox
        .command_policy(&scope(&root, false))
        .unwrap()
        .unwrap();
    assert_eq!(policy.writable, [root.join("sub")]);
    assert!(!policy.network);
    assert_eq!(policy.unreadable, [PathBuf::from("/secret")], "kept below");
    // Under a ceiling, `off` cannot turn the sandbox off.
    let off = SandboxSettings {
        mode: SandboxMode::Off,
        ..SandboxSettings::default()
    };
    let policy = landlock(off, Some(ceiling)).command_policy(&scope(&root, false));
    assert_eq!(policy.unwrap().unwrap().writable, [root.join("sub")]);
}

#[test]
fn children_also_write_their_state_and_reach_their_model() {
    let ws = tempfile::tempdir().unwrap();
    let state = canonical(ws.path()).join("state");
    let sandbox = landlock(SandboxSettings::default(), None);
    let launch = sandbox
        .agent(
            &scope(ws.path(), true),
            std::slice::from_ref(&state),
            "kin",
            &["acp".into()],
        )
        .unwrap();
    let own = launch.policy.unwrap();
    assert!(own.network && own.writable.ends_with(std::slice::from_ref(&state)));
    assert!(state.is_dir(), "made before confining");
    let (_, ceiling) = launch.env.iter().find(|(k, _)| k == CEILING_ENV).unwrap();
    let ceiling: Policy = serde_json::from_str(ceiling).unwrap();
    assert_eq!(ceiling.writable.len(), 1, "read-only: the temp dir alone");
    assert!(!ceiling.network);
}

#[test]
fn kins_own_dirs_and_swapped_roots_are_left_out_and_helpers_write_where_told() {
    let ws = tempfile::tempdir().unwrap();
    let root = canonical(ws.path());
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    let sandbox = landlock(SandboxSettings::default(), None).protecting([data.clone()]);
    let policy = sandbox
        .command_policy(&scope(&root, false))
        .unwrap()
        .unwrap();
    assert_eq!(policy.writable[1..], [root.join("src")]);
    // A root that is now a link is dropped, and said once.
    let link = root.join("src/link");
    std::os::unix::fs::symlink("/etc", &link).unwrap();
    let launch = sandbox.command(&scope(&link, false), "bash", &[]).unwrap();
    assert_eq!(launch.dropped, [link]);
    assert_eq!(
        launch.policy.unwrap().writable.len(),
        1,
        "the temp dir alone"
    );
    assert!(sandbox.dropped_notice("s1", &launch.dropped).is_some());
    assert!(sandbox.dropped_notice("s1", &launch.dropped).is_none());
    // A helper (kin's git): where it is told, no network.
    let git = sandbox
        .helper(std::slice::from_ref(&root.join("src")), "git", &[])
        .unwrap();
    let policy = git.policy.unwrap();
    assert_eq!(policy.writable, [root.join("src")]);
    assert!(!policy.network);
    assert_eq!(git.args[4], "git");
}

#[test]
fn auto_runs_unconfined_where_it_cannot_and_required_refuses() {
    let missing = |mode| {
        Sandbox::new(
            SandboxSettings {
                mode,
                ..SandboxSettings::default()
            },
            Support::Missing("no Landlock".into()),
            Some("/kin".into()),
            None,
        )
    };
    let ws = tempfile::tempdir().unwrap();
    let auto = missing(SandboxMode::Auto).command(&scope(ws.path(), false), "bash", &[]);
    assert_eq!(auto.unwrap().policy, None);
    let error = missing(SandboxMode::Required)
        .command(&scope(ws.path(), false), "bash", &[])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("sandbox is required") && error.contains("no Landlock"),
        "{error}"
    );
    let (warning, title, description) = missing(SandboxMode::Auto).notice();
    assert!(warning && title.contains("without a sandbox"), "{title}");
    assert!(description.contains("no Landlock"), "{description}");
    let sandbox = landlock(SandboxSettings::default(), None);
    assert!(sandbox.first_notice("a").is_some());
    assert!(sandbox.first_notice("a").is_none());
    assert!(!sandbox.notice().0);
}
