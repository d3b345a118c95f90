//! An old flat store (children beside the top-level sessions, one index for both) moves its
//! children into `sessions/children/` once, with their index records, and keeps finding them.

use std::fs;
use std::io::Write;

use kin::session::{Header, SessionStore, SessionSummary};

#[test]
fn an_old_flat_store_moves_its_children_once_and_keeps_finding_them() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let mut child_header = Header::new("c".into(), 2, "/w".into(), vec![]);
    child_header.parent_session = Some("p".into());
    drop(
        store
            .create(&Header::new("p".into(), 1, "/w".into(), vec![]))
            .unwrap(),
    );
    drop(store.create(&child_header).unwrap());
    // As an older kin left it: the child beside its parent, one index for both.
    let dir = store.dir().to_owned();
    let children = dir.join("children");
    fs::rename(children.join("c.jsonl"), dir.join("c.jsonl")).unwrap();
    let old_index = fs::read_to_string(children.join(".index")).unwrap();
    fs::remove_file(children.join(".index")).unwrap();
    let mut flat = fs::OpenOptions::new()
        .append(true)
        .open(dir.join(".index"))
        .unwrap();
    flat.write_all(old_index.as_bytes()).unwrap();
    fs::create_dir(dir.join("c.blobs")).unwrap();
    fs::remove_file(dir.join(".layout")).unwrap();

    let old = SessionStore::open(home.path()).unwrap();
    assert_eq!(old.load("c").unwrap().header.id, "c", "found before moving");
    let ids = |listed: Vec<SessionSummary>| listed.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(ids(old.list().unwrap()), ["p"]);
    assert!(children.join("c.jsonl").is_file() && children.join("c.blobs").is_dir());
    assert!(!dir.join("c.jsonl").exists() && dir.join(".layout").is_file());
    assert!(!fs::read_to_string(dir.join(".index"))
        .unwrap()
        .contains(r#""id":"c""#));
    let listed = old.list_children("p").unwrap();
    assert_eq!(ids(listed), ["c"]);
    // Moved with its index record: the child's file is not read to list it.
    fs::write(children.join("c.jsonl"), "not a log").unwrap();
    let fresh = SessionStore::open(home.path()).unwrap();
    assert_eq!(ids(fresh.list_children("p").unwrap()), ["c"]);
    assert!(fresh.delete("c").unwrap());
    assert!(fresh.list_children("p").unwrap().is_empty());
}
