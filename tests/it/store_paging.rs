//! `session/list` paging over a store of a few thousand sessions while sessions are created
//! (by the lister and by a second kin process on the same store) and deleted between pages:
//! every session that was there before the walk and not deleted is listed exactly once.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use common::Wire;
use serde_json::{json, Value};

const SESSIONS: usize = 3_000;

fn id_of(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// Writes one-line session logs, each modified a second after the one before.
fn write_sessions(dir: &std::path::Path, cwd: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    for n in 0..SESSIONS {
        let id = id_of(n);
        let header = json!({"type": "session", "version": 0, "id": id,
            "createdAt": 1_767_225_600_000u64, "cwd": cwd, "delegationDepth": 0});
        let path = dir.join(format!("{id}.jsonl"));
        std::fs::write(&path, format!("{header}\n")).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(base + Duration::from_secs(n as u64))
            .unwrap();
    }
}

fn ids(answer: &Value) -> Vec<String> {
    answer["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn paging_lists_each_session_once_while_others_are_created_and_deleted() {
    let mut kin = Wire::start(None);
    write_sessions(&kin.home.path().join("sessions"), &kin.cwd());
    let home = kin.home.path().to_string_lossy().into_owned();
    let mut other = Wire::start_with(None, tempfile::tempdir().unwrap(), &[("KIN_HOME", &home)]);
    kin.initialize().await;
    other.initialize().await;

    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut deleted = HashSet::new();
    let mut created = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut request = 10;
    for page in 0.. {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        request += 1;
        let (_, answer) = kin.request(request, "session/list", params).await;
        for id in ids(&answer) {
            *seen.entry(id).or_default() += 1;
        }
        // Between pages: two new sessions (one from each process), one listed and one
        // not yet listed session deleted (newest first: the unlisted ones are the oldest).
        created.insert(kin.new_session().await);
        created.insert(other.new_session().await);
        let listed = seen
            .keys()
            .find(|id| id.starts_with("00000000") && !deleted.contains(*id))
            .cloned();
        let unlisted = (0..SESSIONS)
            .map(id_of)
            .find(|id| !seen.contains_key(id) && !deleted.contains(id));
        for id in [listed, unlisted].into_iter().flatten() {
            request += 1;
            let (_, answer) = kin
                .request(request, "session/delete", json!({"sessionId": id}))
                .await;
            assert!(answer.get("result").is_some(), "{answer}");
            deleted.insert(id);
        }
        match answer["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(page < SESSIONS, "paging ends");
    }

    let twice: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "listed more than once: {twice:?}");
    for id in (0..SESSIONS).map(id_of) {
        if deleted.contains(&id) {
            continue;
        }
        assert!(seen.contains_key(&id), "{id} was never listed");
    }
    // Some were deleted before their page came, and were never listed.
    assert!(deleted.iter().any(|id| !seen.contains_key(id)));

    // A walk with nothing changing lists exactly the sessions there are now.
    let mut now = HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        request += 1;
        let (_, answer) = kin.request(request, "session/list", params).await;
        for id in ids(&answer) {
            assert!(now.insert(id), "listed twice");
        }
        match answer["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let expected: HashSet<String> = (0..SESSIONS)
        .map(id_of)
        .filter(|id| !deleted.contains(id))
        .chain(created)
        .collect();
    assert_eq!(now, expected);
}
