//! The hash maps and sets Cairn uses where it looks keys up on every step.

/// A hash map hashed with foldhash's fast hasher (seeded at random per map), for the keys Cairn
/// looks up several times per step: run ids, step paths, workflow and step names. SipHash, the
/// standard default, cost about 250 instructions a lookup over a 36-character run id.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A hash set hashed as a [`FastMap`].
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
