//! A request body serialized at the cost of what is new in it: the JSON of each message of a provider's last
//! request is kept, and the next request reuses it for the messages it shares (see
//! [`crate::types::Messages`]: a conversation's requests hold their unchanged messages as the same `Arc`s,
//! and a shared message cannot change, so the same `Arc` at the same place has the same bytes).
//!
//! Must never: produce a byte that `serde_json::to_vec(request)` would not (prompt caching on the API side
//! depends on an unchanged prefix being the same bytes).

use std::sync::{Arc, Mutex};

use crate::types::{Message, Request};

/// The last request's messages and their JSON, by place.
#[derive(Debug, Default)]
pub(crate) struct BodyCache(Mutex<Vec<(Arc<Message>, Vec<u8>)>>);

/// Where the (emptied) message list sits in a serialized request. `model` comes before it and is a JSON
/// string, inside which a `"` is always escaped, so the first match is the field itself.
const EMPTY_MESSAGES: &[u8] = b"\"messages\":[]";

impl BodyCache {
    /// `serde_json::to_vec(request)`, byte for byte, serializing only the messages the last request did not
    /// hold at the same place. Also returns how many messages' JSON was reused.
    pub(crate) fn to_vec(&self, request: &Request) -> serde_json::Result<(Vec<u8>, usize)> {
        // Busy: another thread of this provider serializes right now; do it in full rather than wait.
        let Ok(mut cache) = self.0.try_lock() else { return serde_json::to_vec(request).map(|b| (b, 0)) };
        let mut head = request.clone();
        head.messages.clear();
        let head = serde_json::to_vec(&head)?;
        let Some(at) = head.windows(EMPTY_MESSAGES.len()).position(|w| w == EMPTY_MESSAGES) else {
            return serde_json::to_vec(request).map(|b| (b, 0));
        };
        let split = at + EMPTY_MESSAGES.len() - 1; // at the list's closing `]`
        let mut old = std::mem::take(&mut *cache);
        let mut fresh = Vec::with_capacity(request.messages.len());
        let mut body = Vec::with_capacity(head.len() + old.iter().map(|(_, b)| b.len() + 1).sum::<usize>());
        body.extend_from_slice(&head[..split]);
        let mut reused = 0;
        for (i, m) in request.messages.shared().iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            let json = match old.get_mut(i) {
                Some((held, json)) if Arc::ptr_eq(held, m) => {
                    reused += 1;
                    std::mem::take(json)
                }
                _ => serde_json::to_vec(&**m)?,
            };
            body.extend_from_slice(&json);
            fresh.push((m.clone(), json));
        }
        body.extend_from_slice(&head[split..]);
        *cache = fresh;
        Ok((body, reused))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::{ContentBlock, Messages};
    use serde_json::json;

    #[test]
    fn a_growing_conversation_serializes_byte_for_byte_and_reuses_the_unchanged_messages() {
        let cache = BodyCache::default();
        let mut history = Messages::from(vec![Message::user("hi \"messages\":[] there")]);
        for k in 0..6 {
            let mut request = Request {
                model: "m\"messages\":[]".into(),
                max_tokens: 7,
                messages: history.clone(),
                system: Some(json!("sys")),
                stream: k % 2 == 0,
                ..Default::default()
            };
            request.extra.insert("zeta".into(), json!({"messages": []}));
            if k == 3 {
                // A breakpoint on the newest message: that message is copied, its JSON made afresh.
                if let ContentBlock::Text(t) = &mut request.messages.last_mut().unwrap().content[0] {
                    t.extra.insert("cache_control".into(), json!({"type": "ephemeral"}));
                }
            }
            let (body, reused) = cache.to_vec(&request).unwrap();
            assert_eq!(body, serde_json::to_vec(&request).unwrap(), "request {k}");
            if k > 0 {
                // Everything but what was added (2 messages) or re-marked (k == 4 follows the marked one).
                let expect = if k == 4 { history.len() - 3 } else { history.len() - 2 };
                assert_eq!(reused, expect, "request {k}");
            }
            history.push(Message::assistant(format!("answer {k}")));
            history.push(Message::user(format!("question {k}")));
        }
        let empty = Request { model: "m".into(), ..Default::default() };
        assert_eq!(cache.to_vec(&empty).unwrap().0, serde_json::to_vec(&empty).unwrap());
    }
}
