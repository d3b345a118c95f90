//! The store's unit tests (beside `store.rs`, which they test through `super`).

use super::*;
use crate::session::{EventBody, StepRef};

#[test]
fn the_directory_is_made_by_the_first_session_not_by_open() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    assert!(!store.dir().exists());
    assert!(store.list().unwrap().is_empty());
    store
        .create(&Header::new("s1".into(), 1, "/w".into(), vec![]))
        .unwrap();
    assert_eq!(store.list().unwrap().len(), 1);
}

#[test]
fn creation_times_strictly_increase_across_the_stores_clones() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let clone = store.clone();
    let times = [
        store.creation_time(),
        clone.creation_time(),
        store.creation_time(),
    ];
    assert!(times[0] < times[1] && times[1] < times[2], "{times:?}");
}

#[test]
fn event_lines_are_the_files_own_lines_or_none_when_they_do_not_line_up() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let header = Header::new("s1".into(), 1, "/w".into(), vec![]);
    let mut log = store.create(&header).unwrap();
    let events: Vec<Event> = (1..=3)
        .map(|step| {
            log.append(EventBody::StepStart(StepRef { turn: 1, step }), 7)
                .unwrap()
        })
        .collect();
    log.flush().unwrap();
    let text = fs::read_to_string(store.path("s1").unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let two = store.event_lines("s1", &events[..2]).unwrap();
    assert_eq!(
        String::from_utf8(two).unwrap(),
        format!("{}\n{}\n", lines[1], lines[2])
    );

    // A log whose deltas are packed into one row has fewer lines than events.
    let packed = r#"{"type":"session","version":0,"id":"s2","createdAt":0,"delegationDepth":0}
{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}
{"type":"step/end","seq":2,"time":0,"data":{"turn":1,"step":1}}
"#;
    fs::write(store.path("s2").unwrap(), packed).unwrap();
    let loaded = store.load("s2").unwrap();
    assert_eq!(loaded.events.len(), 3);
    assert!(store.event_lines("s2", &loaded.events).is_none());
    assert!(store.event_lines("missing", &loaded.events).is_none());
}

const HEADER: &str =
    r#"{"type":"session","version":0,"id":"s1","createdAt":0,"delegationDepth":0}"#;

fn step_line(seq: u64) -> String {
    format!(r#"{{"type":"step/start","seq":{seq},"time":0,"data":{{"turn":1,"step":{seq}}}}}"#)
}

#[test]
fn a_corrupt_interior_line_is_set_aside_and_every_good_line_kept() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    fs::create_dir_all(store.dir()).unwrap();
    // A line glued onto a write cut short, as an old full disk left it.
    let glued = format!(
        r#"{{"type":"user/message","seq":1,"time":0,"data":{{"con{}"#,
        step_line(1)
    );
    let text = format!("{HEADER}\n{}\n{glued}\n{}\n", step_line(0), step_line(2));
    fs::write(store.path("s1").unwrap(), &text).unwrap();

    let loaded = store.load("s1").unwrap();
    let seqs: Vec<u64> = loaded.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [0, 2]);
    assert_eq!(loaded.set_aside.len(), 1);
    assert_eq!(loaded.set_aside[0].line, 3);
    assert_eq!(loaded.set_aside[0].bytes, glued.as_bytes());

    // Opening for append keeps the log as it is, copies the line beside it, and continues.
    let (_, mut log) = store.open_for_append("s1").unwrap();
    let side = store.path("s1").unwrap().with_extension("jsonl.set-aside");
    assert_eq!(fs::read_to_string(&side).unwrap(), format!("{glued}\n"));
    let event = log
        .append(EventBody::StepStart(StepRef { turn: 1, step: 3 }), 0)
        .unwrap();
    assert_eq!(event.seq, 3);
    assert_eq!(store.load("s1").unwrap().events.len(), 3);
    assert!(fs::read_to_string(store.path("s1").unwrap())
        .unwrap()
        .starts_with(&text));
    store.delete("s1").unwrap();
    assert!(!side.exists());
}

#[test]
fn a_session_locked_elsewhere_is_not_opened_cut_or_deleted() {
    use nix::fcntl::{Flock, FlockArg};
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    fs::create_dir_all(store.dir()).unwrap();
    let path = store.path("s1").unwrap();
    let text = format!("{HEADER}\n{}\n{{\"type\":\"step", step_line(0));
    fs::write(&path, &text).unwrap();
    // Another open file description holds the lock, as another process would.
    let other = Flock::lock(File::open(&path).unwrap(), FlockArg::LockExclusiveNonblock)
        .map_err(|(_, errno)| errno)
        .unwrap();
    let locked =
        |error: StoreError| matches!(error, StoreError::Locked { ref id, .. } if id == "s1");
    assert!(locked(store.open_for_append("s1").err().unwrap()));
    assert!(locked(store.delete("s1").unwrap_err()));
    assert_eq!(store.load("s1").unwrap().events.len(), 1);
    assert_eq!(fs::read_to_string(&path).unwrap(), text, "untouched");
    drop(other);
    let (loaded, _log) = store.open_for_append("s1").unwrap();
    assert_eq!(loaded.torn_tail.as_deref(), Some(&b"{\"type\":\"step"[..]));
    assert!(store.delete("s1").unwrap());
}

#[test]
fn a_bad_header_still_refuses_the_session() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    fs::create_dir_all(store.dir()).unwrap();
    fs::write(
        store.path("s1").unwrap(),
        format!("garbage\n{}\n", step_line(0)),
    )
    .unwrap();
    let error = store.load("s1").unwrap_err();
    assert!(
        matches!(error, StoreError::Corrupt { line: 1, .. }),
        "{error}"
    );
}

fn title(text: &str) -> EventBody {
    EventBody::SessionTitle(crate::session::SessionTitle {
        title: text.into(),
        message_seqs: vec![],
        source: serde_json::json!({"kind": "fallback"}),
    })
}

/// What a listing rebuilt from the session files alone shows.
fn rebuilt(store: &SessionStore) -> Vec<SessionSummary> {
    let _ = fs::remove_file(store.dir().join(index::INDEX_FILE));
    store.list().unwrap()
}

#[test]
fn the_index_follows_create_title_sync_and_delete() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let mut a = store
        .create(&Header::new("a".into(), 1, "/w".into(), vec![]))
        .unwrap();
    let mut b = store
        .create(&Header::new("b".into(), 2, "/v".into(), vec!["/x".into()]))
        .unwrap();
    a.append(title("first"), 0).unwrap();
    a.sync().unwrap();
    b.append(EventBody::StepStart(StepRef { turn: 1, step: 1 }), 0)
        .unwrap();
    b.sync().unwrap();
    let listed = store.list().unwrap();
    let find =
        |listed: &[SessionSummary], id: &str| listed.iter().find(|s| s.id == id).cloned().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(find(&listed, "a").title.as_deref(), Some("first"));
    assert_eq!(find(&listed, "b").additional_directories, ["/x"]);
    // Same order, titles and modification times as the files themselves give.
    assert_eq!(listed, rebuilt(&store), "the index matches the files");

    // Reopened, the session keeps its title in the index.
    drop(a);
    let (_, mut a) = store.open_for_append("a").unwrap();
    a.append(EventBody::StepStart(StepRef { turn: 2, step: 1 }), 0)
        .unwrap();
    a.sync().unwrap();
    let listed = store.list().unwrap();
    assert_eq!(find(&listed, "a").title.as_deref(), Some("first"));
    assert_eq!(listed, rebuilt(&store));

    drop((a, b));
    store.delete("a").unwrap();
    let listed = store.list().unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["b"]
    );
}

#[test]
fn a_fork_seed_brings_its_title_into_the_index() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let mut parent = store
        .create(&Header::new("p".into(), 1, "/w".into(), vec![]))
        .unwrap();
    let seed = vec![parent.append(title("seeded"), 0).unwrap()];
    let lines = store.event_lines("p", &seed).unwrap();
    for (id, raw) in [("c1", true), ("c2", false)] {
        let mut header = Header::new(id.into(), 2, "/w".into(), vec![]);
        header.parent_session = Some("p".into());
        let mut child = store.create(&header).unwrap();
        if raw {
            child.append_raw_lines(&lines, 1).unwrap();
        } else {
            child.append_copied(&seed).unwrap();
        }
        child.sync().unwrap();
    }
    let listed = store.list().unwrap();
    assert!(listed.iter().all(|s| s.title.as_deref() == Some("seeded")));
    assert_eq!(listed, rebuilt(&store));
}

#[test]
fn a_listing_repairs_the_index_from_changes_made_behind_its_back() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    for id in ["a", "b"] {
        drop(
            store
                .create(&Header::new(id.into(), 1, "/w".into(), vec![]))
                .unwrap(),
        );
    }
    assert_eq!(store.list().unwrap().len(), 2);
    // Another program removes one file and copies a session in.
    fs::remove_file(store.path("a").unwrap()).unwrap();
    fs::write(
        store.path("s1").unwrap(),
        format!("{HEADER}\n{}\n", r#"{"type":"session/title","seq":0,"time":0,"data":{"title":"copied","messageSeqs":[],"source":{"kind":"user"}}}"#),
    )
    .unwrap();
    // Newer than `b` for certain: file times are too coarse to order two quick writes.
    let later = fs::metadata(store.path("b").unwrap())
        .unwrap()
        .modified()
        .unwrap()
        + std::time::Duration::from_secs(1);
    fs::File::options()
        .write(true)
        .open(store.path("s1").unwrap())
        .unwrap()
        .set_modified(later)
        .unwrap();
    let listed = store.list().unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s1", "b"]);
    assert_eq!(listed[0].title.as_deref(), Some("copied"));
    // The repair was recorded: the index alone now answers the same.
    let index = fs::read_to_string(store.dir().join(index::INDEX_FILE)).unwrap();
    assert!(
        index.contains(r#""id":"s1""#) && index.contains(r#""deleted":true"#),
        "{index}"
    );
    assert_eq!(store.list().unwrap(), listed);
}

#[test]
fn a_listing_compacts_an_index_of_many_records() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let mut log = store
        .create(&Header::new("a".into(), 1, "/w".into(), vec![]))
        .unwrap();
    for turn in 0..100 {
        log.append(EventBody::StepStart(StepRef { turn, step: 1 }), 0)
            .unwrap();
        log.sync().unwrap();
    }
    let index = store.dir().join(index::INDEX_FILE);
    assert!(fs::read_to_string(&index).unwrap().lines().count() > 100);
    let listed = store.list().unwrap();
    assert_eq!(fs::read_to_string(&index).unwrap().lines().count(), 2); // header, entry
    assert_eq!(store.list().unwrap(), listed);
}
