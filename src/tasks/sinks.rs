//! What the task service tells the two sinks its owner installs: a [`Notice`] for a task that
//! settled unseen, and a [`Record`] of each owned task's start and of its owner learning how
//! it ended.

use super::{TaskId, TaskStatus};

/// What the notice sink is told about a task that settled unseen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Leave the owner session this message (its id is `id`) for its next model call; with
    /// it, the owner learns that `task` ended as `status`.
    Post {
        /// The owner session's id.
        owner: String,
        /// The message's id.
        id: String,
        /// The message's text.
        text: String,
        /// The task it is about.
        task: TaskId,
        /// How the task ended.
        status: TaskStatus,
    },
    /// The result was read after all (a `task_output` that began before the task settled may
    /// read it just after): drop message `id` if it has not reached the model yet.
    Withdraw {
        /// The owner session's id.
        owner: String,
        /// The message's id.
        id: String,
    },
}

/// Receives [`Notice`]s.
pub(crate) type NoticeSink = Box<dyn Fn(Notice) + Send + Sync>;

/// What the record sink is told about the tasks of an owner, in order, so the owner's log can
/// show which tasks a later process finds unfinished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Told before the task's work begins.
    Started {
        /// The owner session's id.
        owner: String,
        /// The task.
        task: TaskId,
        /// Its kind (`bash`, `subagent`, ...).
        kind: String,
        /// Its label.
        label: String,
        /// What the task works on, as its starter named it (e.g. a child's id).
        subject: Option<String>,
    },
    /// Told once, when the owner learns how the task ended: a terminal read or wait, or a
    /// kill. A notice carries its own (see [`Notice::Post`]); one withdrawn is told here.
    Ended {
        /// The owner session's id.
        owner: String,
        /// The task.
        task: TaskId,
        /// The terminal status, or `killed` for a kill of a running task.
        status: TaskStatus,
    },
}

/// Receives [`Record`]s.
pub(crate) type RecordSink = Box<dyn Fn(Record) + Send + Sync>;
