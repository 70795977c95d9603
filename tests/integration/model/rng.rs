//! The model's random source: splitmix64, seeded and printed, so every run replays; plus the
//! generators that draw numbers from their whole space (every sign, bound and extreme), leaning
//! towards the values that matter (the current value, the bounds, one step off).

/// splitmix64: small, seedable, good enough to pick interleavings.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (i128::from(hi) - i128::from(lo) + 1) as u128;
        let r = u128::from(self.next_u64()) % span.max(1);
        (i128::from(lo) + r as i128) as i64
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// A number anywhere, near `anchor` most of the time: at it, a few away on either side,
    /// a power of two away, or at an extreme of the 64-bit range.
    pub fn around(&mut self, anchor: i64) -> i64 {
        match self.below(10) {
            0..=4 => anchor.saturating_add(self.range(-40, 40)),
            5 | 6 => {
                let jump = 1_i64 << self.range(6, 40);
                if self.chance(50) {
                    anchor.saturating_add(jump)
                } else {
                    anchor.saturating_sub(jump)
                }
            }
            7 => anchor,
            8 => self.pick(&[i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX]),
            _ => self.range(-1_000, 1_000),
        }
    }

    /// [`Rng::around`] one of `anchors`.
    pub fn around_any(&mut self, anchors: &[i64]) -> i64 {
        let a = self.pick(anchors);
        self.around(a)
    }

    /// A step of any sign and size, the sign of `current` most of the time (0 now and then,
    /// which must be refused).
    pub fn step(&mut self, current: i64) -> i64 {
        let size = match self.below(20) {
            0 => return 0,
            1..=11 => self.range(1, 3),
            12..=17 => self.range(4, 100),
            18 => 1_i64 << self.range(7, 40),
            _ => i64::MAX,
        };
        let same = if current < 0 { -size } else { size };
        if self.chance(75) { same } else { -same }
    }
}
