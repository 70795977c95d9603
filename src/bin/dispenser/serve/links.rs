//! What the service keeps for its ticket links (`tokens.rs`: a token people open on their own
//! phones): how many tickets each phone and each address took lately — a token bucket each,
//! so one phone, or one host making up phones, cannot empty a queue — and which request ids it
//! answered, so that a phone's retried take (its page reloaded) is answered without counting
//! as a new one.
//!
//! Both live in memory only: a restart forgets them, and every phone and address then starts
//! with its whole allowance (a limit, not a ledger).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::tokens::Link;

/// The most buckets kept: past it, the full ones (which say nothing) are dropped, then the
/// fullest of the others.
const MAX_BUCKETS: usize = 100_000;
/// The most request ids remembered, and for how long.
const MAX_REMEMBERED: usize = 100_000;
const REMEMBERED_FOR: Duration = Duration::from_secs(24 * 3600);

/// The shortest and longest phone id in a ticket link's request id (`PHONE.TAKE`).
pub(super) const PHONE_ID: std::ops::RangeInclusive<usize> = 8..=32;

/// Who a bucket counts: a phone's takes (its id, from its request ids), an address's takes,
/// or an address's reads (an address as [`block`] counts it).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) enum Who {
    Phone(String),
    Address(IpAddr),
    Reads(IpAddr),
}

impl Who {
    /// An address's takes.
    pub(super) fn address(ip: IpAddr) -> Who {
        Who::Address(block(ip))
    }
}

/// An address as every per-address count counts it (takes, reads, ticket streams): IPv4 as
/// it is (an IPv4-mapped IPv6 address as its IPv4), IPv6 by its first 64 bits — the block one
/// host is usually given, so one host cannot count as 2^64 addresses.
pub(super) fn block(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// The window of the read buckets.
pub(super) const READ_WINDOW: Duration = Duration::from_secs(60);

/// Takes left, as of `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    /// The level at `now`: refilled at `size` per `window`, up to `size`.
    fn level(&self, size: u64, window: Duration, now: Instant) -> f64 {
        let size = size as f64;
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * size
            / window.as_secs_f64().max(f64::MIN_POSITIVE);
        (self.level + refill).min(size)
    }
}

/// A take refused: which limit, its size and window, and when one more take is allowed.
#[derive(Debug, PartialEq)]
pub(super) struct Limited {
    pub(super) who: Who,
    pub(super) allowed: u64,
    pub(super) window: Duration,
    pub(super) retry_after: Duration,
}

/// One take counted against a phone and an address, until [`Links::refund`] gives it back.
#[must_use]
pub(super) struct Counted {
    token: String,
    who: Vec<Who>,
}

/// A ticket a link's take answered: kept by request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Answered {
    pub(super) serial: u64,
}

/// The buckets and the request ids answered, of every link.
#[derive(Default)]
pub(super) struct Links {
    buckets: Mutex<HashMap<(String, Who), Bucket>>,
    answered: Mutex<Answers>,
}

#[derive(Default)]
struct Answers {
    by_key: HashMap<(String, String), (Answered, Instant)>,
    order: VecDeque<((String, String), Instant)>,
}

impl Links {
    /// Counts one take of `token` (a link with limits `link`) from `phone` and from `address`
    /// (when known), or says which limit it would pass (counting nothing).
    pub(super) fn count(
        &self,
        token: &str,
        link: &Link,
        phone: &str,
        address: Option<IpAddr>,
        now: Instant,
    ) -> Result<Counted, Limited> {
        let mut who = vec![Who::Phone(phone.to_owned())];
        who.extend(address.map(Who::address));
        let size = |w: &Who| size_of(w, link);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        for w in &who {
            let level = buckets
                .get(&(token.to_owned(), w.clone()))
                .map_or(size(w) as f64, |b| b.level(size(w), link.window, now));
            if level < 1.0 {
                let per_take = link.window.as_secs_f64() / size(w) as f64;
                return Err(Limited {
                    who: w.clone(),
                    allowed: size(w),
                    window: link.window,
                    retry_after: Duration::from_secs_f64(((1.0 - level) * per_take).max(0.0)),
                });
            }
        }
        if buckets.len() + who.len() > MAX_BUCKETS {
            prune(&mut buckets, link, now);
        }
        for w in &who {
            let key = (token.to_owned(), w.clone());
            let level = buckets
                .get(&key)
                .map_or(size(w) as f64, |b| b.level(size(w), link.window, now));
            buckets.insert(
                key,
                Bucket {
                    level: level - 1.0,
                    at: now,
                },
            );
        }
        Ok(Counted {
            token: token.to_owned(),
            who,
        })
    }

    /// Gives back a take counted by [`Links::count`] that took nothing new (a replayed take, a
    /// refusal such as a full queue).
    pub(super) fn refund(&self, counted: Counted, link: &Link, now: Instant) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        for w in counted.who {
            let size = size_of(&w, link);
            if let Some(b) = buckets.get_mut(&(counted.token.clone(), w)) {
                b.level = b.level(size, link.window, now) + 1.0;
                b.at = now;
            }
        }
    }

    /// Counts one read through `token` (a link with limits `link`) from `address`, or says
    /// when one more is allowed (counting nothing). A read the service answers from the
    /// queue's shared status costs the database nothing more; the count bounds what one
    /// address costs the service itself.
    pub(super) fn read(
        &self,
        token: &str,
        link: &Link,
        address: IpAddr,
        now: Instant,
    ) -> Result<(), Limited> {
        let who = Who::Reads(block(address));
        let size = link.reads_per_address;
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let key = (token.to_owned(), who.clone());
        let level = buckets
            .get(&key)
            .map_or(size as f64, |b| b.level(size, READ_WINDOW, now));
        if level < 1.0 {
            let per_read = READ_WINDOW.as_secs_f64() / size as f64;
            return Err(Limited {
                who,
                allowed: size,
                window: READ_WINDOW,
                retry_after: Duration::from_secs_f64(((1.0 - level) * per_read).max(0.0)),
            });
        }
        if buckets.len() + 1 > MAX_BUCKETS {
            prune(&mut buckets, link, now);
        }
        buckets.insert(
            key,
            Bucket {
                level: level - 1.0,
                at: now,
            },
        );
        Ok(())
    }

    /// What the take with request id `key` of `token` answered, if this service answered it.
    pub(super) fn answered(&self, token: &str, key: &str) -> Option<Answered> {
        let a = self.answered.lock().unwrap_or_else(|p| p.into_inner());
        a.by_key
            .get(&(token.to_owned(), key.to_owned()))
            .map(|(answer, _)| *answer)
    }

    /// Remembers what the take with request id `key` of `token` answered.
    pub(super) fn remember(&self, token: &str, key: &str, answer: Answered, now: Instant) {
        let mut a = self.answered.lock().unwrap_or_else(|p| p.into_inner());
        let k = (token.to_owned(), key.to_owned());
        a.by_key.insert(k.clone(), (answer, now));
        a.order.push_back((k, now));
        while let Some((oldest, at)) = a.order.front().cloned() {
            let expired = now.saturating_duration_since(at) > REMEMBERED_FOR;
            if !(expired || a.order.len() > MAX_REMEMBERED) {
                break;
            }
            a.order.pop_front();
            // Only when that entry is the one remembered (a key remembered again stays).
            if a.by_key.get(&oldest).is_some_and(|(_, t)| *t == at) {
                a.by_key.remove(&oldest);
            }
        }
    }
}

/// A bucket's size under `link`, and its window.
fn size_of(w: &Who, link: &Link) -> u64 {
    match w {
        Who::Phone(_) => link.per_phone,
        Who::Address(_) => link.per_address,
        Who::Reads(_) => link.reads_per_address,
    }
}

/// The window a bucket of `w` refills over.
fn window_of(w: &Who, link: &Link) -> Duration {
    match w {
        Who::Reads(_) => READ_WINDOW,
        _ => link.window,
    }
}

/// Makes room among the buckets: drops the full ones, then the fullest of the rest.
fn prune(buckets: &mut HashMap<(String, Who), Bucket>, link: &Link, now: Instant) {
    let level = |w: &Who, b: &Bucket| {
        let size = size_of(w, link);
        b.level(size, window_of(w, link), now) / size as f64
    };
    buckets.retain(|(_, w), b| level(w, b) < 1.0);
    if buckets.len() >= MAX_BUCKETS {
        let mut fullest: Vec<((String, Who), f64)> = buckets
            .iter()
            .map(|(k, b)| (k.clone(), level(&k.1, b)))
            .collect();
        fullest.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (k, _) in fullest.into_iter().take(MAX_BUCKETS / 10) {
            buckets.remove(&k);
        }
    }
}

/// The phone id of a ticket link's request id `PHONE.TAKE` (each part letters, digits, `-`
/// and `_`; PHONE 8 to 32 of them, TAKE at least one), or `None`.
pub(super) fn phone_of(key: &str) -> Option<&str> {
    let (phone, take) = key.split_once('.')?;
    let part = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (PHONE_ID.contains(&phone.len()) && part(phone) && part(take)).then_some(phone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(per_phone: u64, per_address: u64, window_s: u64) -> Link {
        Link {
            queue: "lobby".into(),
            per_phone,
            per_address,
            window: Duration::from_secs(window_s),
            reads_per_address: 60,
        }
    }

    /// Reads through a link are counted per address block (issue 59, 3): 60 a minute here,
    /// then refused until one refills; another block has its own; the takes' buckets are apart.
    #[test]
    fn reads_are_counted_per_address_block_apart_from_takes() {
        let links = Links::default();
        let l = link(2, 3, 60);
        let t0 = Instant::now();
        let a: IpAddr = "2001:db8:7:7::1".parse().unwrap();
        let same: IpAddr = "2001:db8:7:7:ffff::2".parse().unwrap();
        for k in 0..60 {
            let from = if k % 2 == 0 { a } else { same };
            links.read("link", &l, from, t0).unwrap();
        }
        let no = links.read("link", &l, a, t0).unwrap_err();
        assert_eq!(no.who, Who::Reads("2001:db8:7:7::".parse().unwrap()));
        assert_eq!((no.allowed, no.retry_after), (60, Duration::from_secs(1)));
        links
            .read("link", &l, "2001:db8:7:8::1".parse().unwrap(), t0)
            .unwrap();
        links
            .read("link", &l, a, t0 + Duration::from_secs(1))
            .unwrap();
        // Takes from that block are not spent by its reads.
        let _taken = links.count("link", &l, "phone-ccc", Some(a), t0).unwrap();
    }

    #[test]
    fn a_phone_and_an_address_take_their_allowance_then_wait_for_the_refill() {
        let links = Links::default();
        let l = link(2, 3, 60);
        let t0 = Instant::now();
        let addr: IpAddr = "192.0.2.7".parse().unwrap();
        let a = links
            .count("link", &l, "phone-aaa", Some(addr), t0)
            .unwrap();
        let _b = links
            .count("link", &l, "phone-aaa", Some(addr), t0)
            .unwrap();
        let no = links
            .count("link", &l, "phone-aaa", Some(addr), t0)
            .err()
            .unwrap();
        assert_eq!(no.who, Who::Phone("phone-aaa".into()));
        assert_eq!((no.allowed, no.window), (2, Duration::from_secs(60)));
        assert_eq!(no.retry_after, Duration::from_secs(30));
        // A refused take counted nothing: another phone on the address has one left.
        let _c = links
            .count("link", &l, "phone-bbb", Some(addr), t0)
            .unwrap();
        let no = links
            .count("link", &l, "phone-ccc", Some(addr), t0)
            .err()
            .unwrap();
        assert_eq!(no.who, Who::Address(addr));
        // The same phone id through another link token counts apart.
        assert!(
            links
                .count("other", &l, "phone-aaa", Some(addr), t0)
                .is_ok()
        );
        // A refund gives one back to both.
        links.refund(a, &l, t0);
        assert!(links.count("link", &l, "phone-aaa", Some(addr), t0).is_ok());
        // Half a window later, one take came back to the phone (2 per 60 s).
        let later = t0 + Duration::from_secs(30);
        assert!(links.count("link", &l, "phone-aaa", None, later).is_ok());
        let no = links
            .count("link", &l, "phone-aaa", None, later)
            .err()
            .unwrap();
        assert_eq!(no.retry_after, Duration::from_secs(30));
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_bit_prefix() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Who::address(a), Who::address(b));
        assert_ne!(Who::address(a), Who::address(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(
            Who::address(mapped),
            Who::Address("192.0.2.7".parse().unwrap())
        );
    }

    #[test]
    fn request_ids_name_their_phone() {
        assert_eq!(phone_of("0123456789abcdef.42"), Some("0123456789abcdef"));
        assert_eq!(phone_of("phone_id-1.take-2"), Some("phone_id-1"));
        for bad in [
            "0123456789abcdef",
            "short.1",
            "0123456789abcdef.",
            ".1",
            "01234567 89.1",
            "0123456789abcdef.a.b",
        ] {
            assert_eq!(phone_of(bad), None, "{bad}");
        }
        assert_eq!(phone_of(&format!("{}.1", "a".repeat(33))), None);
    }

    #[test]
    fn answers_are_remembered_for_a_day_and_a_key_remembered_again_stays() {
        let links = Links::default();
        let t0 = Instant::now();
        links.remember("link", "k1", Answered { serial: 1 }, t0);
        links.remember(
            "link",
            "k2",
            Answered { serial: 2 },
            t0 + Duration::from_secs(3600),
        );
        links.remember(
            "link",
            "k1",
            Answered { serial: 1 },
            t0 + Duration::from_secs(7200),
        );
        assert_eq!(links.answered("link", "k1"), Some(Answered { serial: 1 }));
        assert_eq!(links.answered("other", "k1"), None);
        // A day after k2, k2 goes; k1 (remembered again later) stays.
        let day = t0 + REMEMBERED_FOR + Duration::from_secs(3601);
        links.remember("link", "k3", Answered { serial: 3 }, day);
        assert_eq!(links.answered("link", "k2"), None);
        assert_eq!(links.answered("link", "k1"), Some(Answered { serial: 1 }));
        assert_eq!(links.answered("link", "k3"), Some(Answered { serial: 3 }));
    }
}
