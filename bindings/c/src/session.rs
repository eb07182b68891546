//! Session files of an agent: attach one (`tooloop_agent_open_session`, like the `"session"` config key)
//! or write the conversation to one (`tooloop_agent_save_session`). Both only between runs.

use std::ffi::c_char;
use std::path::Path;

use tooloop::StoreLocation;
use tooloop::{Agent, Error, Session};

use crate::agent::tooloop_agent;
use crate::ffi::{Failure, boundary, handle, str_arg};
use crate::status_codes::tooloop_status;

/// Open the session at `path` and attach it to `agent` (whose conversation must be empty).
fn attach(agent: &Agent, path: &Path) -> tooloop::Result<()> {
    if !agent.conversation().is_empty() {
        // Checked before opening: the open would lock the file, and this agent may be the one holding it,
        // which would read as "in use" rather than the real reason.
        return Err(Error::Config("attach the session before the conversation has entries".into()));
    }
    agent.attach_store(tooloop::open_store(path, None)?)?;
    Ok(())
}

/// Write `agent`'s conversation to the session file `path`.
fn save(agent: &Agent, path: &Path) -> tooloop::Result<()> {
    // Saving onto the agent's own attached session file does nothing: that file is always current.
    if let Some(current) = agent.session_info().map(|i| i.path) {
        if let (Ok(x), Ok(y)) = (std::fs::canonicalize(&current), std::fs::canonicalize(path)) {
            if x == y {
                return Ok(());
            }
        }
    }
    if let StoreLocation::Database { .. } = StoreLocation::parse(path)? {
        return Err(Error::Config("save writes a session file; a database session is written as it goes".into()));
    }
    Session::save(path, &agent.conversation().snapshot())
}

/// Attach a session file (or a database session, `path.db#id`, as the `"session"` key) to an agent whose
/// conversation is empty: the file's conversation is loaded (a
/// torn last line from a crash is cut off; a tool call left without a result is answered as
/// interrupted), then every finished entry is appended to it as the conversation goes on (flushed and
/// synced before the next request). The file (0600) and its folders (0700) are created if missing. Same
/// as the `"session"` config key. `tooloop_agent_resume` continues a loaded conversation;
/// `tooloop_agent_run` adds to it. The agent holds the file locked until `tooloop_agent_free`.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `path`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_BUSY`, `TOOLOOP_CONFIG` (the conversation is not empty), `TOOLOOP_IO` (cannot be read or
/// written; not a tooloop session or a newer format version, left untouched; in use by another agent),
/// `TOOLOOP_PANIC`.
/// Threads: the agent's thread.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_open_session(agent: *mut tooloop_agent, path: *const c_char) -> tooloop_status {
    boundary("tooloop_agent_open_session", || {
        let a = handle(agent, "agent")?;
        let path = str_arg(path, "path")?;
        a.agent.when_idle(|| attach(&a.agent, Path::new(path))).map_err(Failure::from)
    })
}

/// Write the whole conversation to `path` as a session file (the format `tooloop_agent_open_session`
/// and the Python `session=` load), replacing any file there atomically (written beside it, then
/// renamed). Saving onto the agent's own attached session file does nothing: that file is always current.
/// The agent does not start appending to `path`: use `tooloop_agent_open_session` for that.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (NULL `agent` or `path`), `TOOLOOP_INVALID_UTF8`,
/// `TOOLOOP_BUSY`, `TOOLOOP_IO`, `TOOLOOP_PANIC`. Threads: the agent's thread.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_agent_save_session(agent: *const tooloop_agent, path: *const c_char) -> tooloop_status {
    boundary("tooloop_agent_save_session", || {
        let a = handle(agent, "agent")?;
        let path = str_arg(path, "path")?;
        a.agent.when_idle(|| save(&a.agent, Path::new(path))).map_err(Failure::from)
    })
}
