//! [`Messages`]: the message list of a [`Request`](super::Request), each message shared rather than copied,
//! so building a request from a long conversation costs what is new in it, not the whole history.
//!
//! Must never: change a message another holder sees (changes copy the one message first), or serialize
//! differently from a `Vec<Message>` holding the same messages.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Message;

/// A request's messages: a list of [`Message`]s that works like a `Vec<Message>` (index, iterate, push,
/// compare with a `Vec`, convert from and into one) and serializes exactly as one, but holds each message
/// behind an [`Arc`]. Cloning the list, or building a request from the conversation's cached view, shares
/// the messages instead of deep-copying them; changing a message through the list (`[i]` on a mutable
/// list, [`Messages::last_mut`], [`Messages::iter_mut`]) copies that message first if anyone else holds it.
///
/// # Threads and cloning
/// `Send + Sync`. A clone costs one pointer copy per message.
#[derive(Clone, Default)]
pub struct Messages(Vec<Arc<Message>>);

impl Messages {
    /// An empty list.
    pub fn new() -> Self {
        Messages(Vec::new())
    }

    /// An empty list with room for `n` messages.
    pub fn with_capacity(n: usize) -> Self {
        Messages(Vec::with_capacity(n))
    }

    /// How many messages.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The messages in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Message> + ExactSizeIterator {
        self.0.iter().map(|m| &**m)
    }

    /// The messages in order, to change (each shared one is copied first).
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Message> + ExactSizeIterator {
        self.0.iter_mut().map(Arc::make_mut)
    }

    /// Message `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&Message> {
        self.0.get(i).map(|m| &**m)
    }

    /// Message `i` to change (copied first if shared), if there is one.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Message> {
        self.0.get_mut(i).map(Arc::make_mut)
    }

    /// The first message.
    pub fn first(&self) -> Option<&Message> {
        self.get(0)
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.0.last().map(|m| &**m)
    }

    /// The last message to change (copied first if shared).
    pub fn last_mut(&mut self) -> Option<&mut Message> {
        self.0.last_mut().map(Arc::make_mut)
    }

    /// Append a message.
    pub fn push(&mut self, message: Message) {
        self.0.push(Arc::new(message));
    }

    /// Append a message someone else may hold too.
    pub fn push_shared(&mut self, message: Arc<Message>) {
        self.0.push(message);
    }

    /// Remove the last message and return it.
    pub fn pop(&mut self) -> Option<Message> {
        self.0.pop().map(Arc::unwrap_or_clone)
    }

    /// Insert a message at `i` (panics when `i > len`, as `Vec::insert` does).
    pub fn insert(&mut self, i: usize, message: Message) {
        self.0.insert(i, Arc::new(message));
    }

    /// Remove message `i` and return it (panics when out of range, as `Vec::remove` does).
    pub fn remove(&mut self, i: usize) -> Message {
        Arc::unwrap_or_clone(self.0.remove(i))
    }

    /// Keep the first `n` messages.
    pub fn truncate(&mut self, n: usize) {
        self.0.truncate(n);
    }

    /// Remove every message.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The shared messages themselves: two lists hold the same message when their `Arc`s are
    /// [`Arc::ptr_eq`], which a binding uses to reuse what it built for a message the last time.
    pub fn shared(&self) -> &[Arc<Message>] {
        &self.0
    }

    /// A `Vec` of copies of the messages.
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// The messages as a `Vec` (copying only those someone else holds too).
    pub fn into_vec(self) -> Vec<Message> {
        self.into_iter().collect()
    }
}

impl std::fmt::Debug for Messages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.0.iter().zip(&other.0).all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<Messages> for Vec<Message> {
    fn eq(&self, other: &Messages) -> bool {
        other == self
    }
}

impl std::ops::Index<usize> for Messages {
    type Output = Message;
    fn index(&self, i: usize) -> &Message {
        &self.0[i]
    }
}

impl std::ops::IndexMut<usize> for Messages {
    fn index_mut(&mut self, i: usize) -> &mut Message {
        Arc::make_mut(&mut self.0[i])
    }
}

impl From<Vec<Message>> for Messages {
    fn from(v: Vec<Message>) -> Self {
        Messages(v.into_iter().map(Arc::new).collect())
    }
}

impl From<Vec<Arc<Message>>> for Messages {
    fn from(v: Vec<Arc<Message>>) -> Self {
        Messages(v)
    }
}

impl From<Messages> for Vec<Message> {
    fn from(m: Messages) -> Self {
        m.into_vec()
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Messages(iter.into_iter().map(Arc::new).collect())
    }
}

impl FromIterator<Arc<Message>> for Messages {
    fn from_iter<I: IntoIterator<Item = Arc<Message>>>(iter: I) -> Self {
        Messages(iter.into_iter().collect())
    }
}

impl Extend<Message> for Messages {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        self.0.extend(iter.into_iter().map(Arc::new));
    }
}

impl Extend<Arc<Message>> for Messages {
    fn extend<I: IntoIterator<Item = Arc<Message>>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl IntoIterator for Messages {
    type Item = Message;
    type IntoIter = std::iter::Map<std::vec::IntoIter<Arc<Message>>, fn(Arc<Message>) -> Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().map(Arc::unwrap_or_clone as fn(Arc<Message>) -> Message)
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Arc<Message>>, fn(&'a Arc<Message>) -> &'a Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(Arc::as_ref as fn(&'a Arc<Message>) -> &'a Message)
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(d).map(Messages::from)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::{ContentBlock, Role};

    fn sample() -> Vec<Message> {
        vec![Message::user("hi"), Message::assistant("hello"), Message::user("bye")]
    }

    #[test]
    fn serializes_byte_for_byte_as_a_vec_and_reads_back() {
        let m = Messages::from(sample());
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, serde_json::to_string(&sample()).unwrap());
        let back: Messages = serde_json::from_str(&json).unwrap();
        assert_eq!(back, sample());
        assert_eq!(format!("{m:?}"), format!("{:?}", sample()));
    }

    #[test]
    fn a_clone_shares_and_a_change_copies_only_the_message_changed() {
        let a = Messages::from(sample());
        let mut b = a.clone();
        assert!(a.shared().iter().zip(b.shared()).all(|(x, y)| Arc::ptr_eq(x, y)));
        b[2].content.push(ContentBlock::text("more"));
        b.last_mut().unwrap().role = Role::User;
        assert_eq!(a, sample(), "the original is untouched");
        assert!(Arc::ptr_eq(&a.shared()[0], &b.shared()[0]) && Arc::ptr_eq(&a.shared()[1], &b.shared()[1]));
        assert!(!Arc::ptr_eq(&a.shared()[2], &b.shared()[2]));
        assert_eq!(b[2].content.len(), 2);
        assert_eq!(b.into_vec().len(), 3);
    }
}
