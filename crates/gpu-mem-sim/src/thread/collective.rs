//! Barriers and collectives: which threads a barrier waits for, what memory it orders, and the
//! one table of collective operations.
//!
//! [`Collective::info`] is the table: each operation's code in the prelude's ABI
//! (`GM_SIM_OP_*` in `gpu_mem.h`, checked against the header by a test), the spelling reports
//! use, the threads it synchronizes, and the names kernel source calls it by. Everything else
//! is derived from it: decoding a code ([`Collective::from_code`]), messages, the names the
//! stackless rewrite turns into `co_await`s (`crate::source`), and the executor's release rules
//! (`crate::executor::release`), whose results are computed by [`Combine`].

/// The memory a barrier orders (ROC's `CLK_LOCAL_MEM_FENCE` / `CLK_GLOBAL_MEM_FENCE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fence {
    /// Shared (group) memory: `__syncthreads()`.
    Local,
    /// Global memory as well: `__threadfence()` + barrier.
    Global,
}

/// Which threads a barrier waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BarrierScope {
    /// Every thread of the block.
    Block,
    /// The threads of the caller's warp (wavefront).
    Warp,
}

/// A collective operation: a barrier of a warp (or block) that also exchanges values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collective {
    /// `__shfl_sync`: the value of lane `arg` (within groups of `width` lanes).
    Shfl,
    /// `__shfl_up_sync`: the value of lane `lane - arg`.
    ShflUp,
    /// `__shfl_down_sync`: the value of lane `lane + arg`.
    ShflDown,
    /// `__shfl_xor_sync`: the value of lane `lane ^ arg`.
    ShflXor,
    /// `__ballot_sync`: one bit per lane whose value is non-zero.
    Ballot,
    /// `__all_sync`: 1 when every lane's value is non-zero.
    All,
    /// `__any_sync`: 1 when some lane's value is non-zero.
    Any,
    /// `syncthreads_count`: the block's number of non-zero values.
    SyncCount,
    /// `syncthreads_and`: 1 when every value of the block is non-zero.
    SyncAnd,
    /// `syncthreads_or`: 1 when some value of the block is non-zero.
    SyncOr,
    /// `__activemask` (and `coalesced_threads`): the lanes of the warp that reach the same
    /// call before the warp's other lanes can go on (they wait elsewhere or have ended): what
    /// a GPU's active mask is after divergence.
    Active,
    /// `this_grid().sync()`: every thread of the block, then every block of the grid (a
    /// cooperative launch, whose blocks all run at once).
    GridSync,
    /// `__reduce_add_sync` & co, and a warp-sized tile's `cooperative_groups::reduce`: the
    /// lanes' values combined by the operation `arg` names (`GM_SIM_REDUCE_*`), in one
    /// exchange.
    Reduce,
}

/// What a [`Collective::Reduce`] combines the lanes' values with (its `arg`, the prelude's
/// `GM_SIM_REDUCE_*`): `__reduce_*_sync`'s operations on 32-bit words, folded in lane order,
/// or a warp-sized tile's `cooperative_groups::reduce`, a butterfly ([`Reduction::butterfly`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduction {
    Add,
    Min,
    MinUnsigned,
    Max,
    MaxUnsigned,
    And,
    Or,
    Xor,
    /// A tile's reduce: `GM_SIM_REDUCE_TILE + 4 * op + type`.
    Tile(TileOp, WordType),
}

/// Cooperative groups' operations, in the prelude's order (`plus` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TileOp {
    Plus,
    Less,
    Greater,
    BitAnd,
    BitOr,
    BitXor,
}

/// The type of a tile reduction's values, in the prelude's order (`int` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WordType {
    I32,
    U32,
    F32,
    F64,
}

/// `GM_SIM_REDUCE_TILE`: the first tile reduction's code.
const TILE_REDUCTIONS: i64 = 16;

impl Reduction {
    /// Every `__reduce_*_sync` operation, in code order (`GM_SIM_REDUCE_ADD` is 0).
    pub(crate) const ALL: [Reduction; 8] = [
        Reduction::Add,
        Reduction::Min,
        Reduction::MinUnsigned,
        Reduction::Max,
        Reduction::MaxUnsigned,
        Reduction::And,
        Reduction::Or,
        Reduction::Xor,
    ];

    /// `op(own, partner)` of two lanes' words for a tile's reduction, as the tile's reduce
    /// computes it in C++ (`cooperative_groups/reduce.h`: `plus` is `a + b`, `less` is
    /// `b < a ? b : a`, `greater` is `a < b ? b : a`); integers wrap.
    fn tile_op(op: TileOp, ty: WordType, own: u64, partner: u64) -> u64 {
        use std::cmp::Ordering::Less;
        let order = |a: u64, b: u64| match ty {
            WordType::I32 => (a as u32 as i32).partial_cmp(&(b as u32 as i32)),
            WordType::U32 => (a as u32).partial_cmp(&(b as u32)),
            WordType::F32 => f32::from_bits(a as u32).partial_cmp(&f32::from_bits(b as u32)),
            WordType::F64 => f64::from_bits(a).partial_cmp(&f64::from_bits(b)),
        };
        match op {
            TileOp::Plus => match ty {
                WordType::I32 | WordType::U32 => {
                    u64::from((own as u32).wrapping_add(partner as u32))
                }
                WordType::F32 => u64::from(
                    (f32::from_bits(own as u32) + f32::from_bits(partner as u32)).to_bits(),
                ),
                WordType::F64 => (f64::from_bits(own) + f64::from_bits(partner)).to_bits(),
            },
            TileOp::Less if order(partner, own) == Some(Less) => partner,
            TileOp::Greater if order(own, partner) == Some(Less) => partner,
            TileOp::Less | TileOp::Greater => own,
            // (Bit operations of floats are not lowered; the words would be combined as bits.)
            TileOp::BitAnd => own & partner,
            TileOp::BitOr => own | partner,
            TileOp::BitXor => own ^ partner,
        }
    }

    /// A tile's butterfly over `values` (a warp's words, `None` for lanes that take no part):
    /// for offsets `width / 2` down to 1, each lane combines its word with that of the lane
    /// whose index differs in that bit (its own, where that lane takes no part, as a shuffle
    /// gives it), `op(own, partner)`; each lane's last word. Only for [`Reduction::Tile`].
    pub(crate) fn butterfly(self, values: &mut [Option<u64>], width: usize) {
        let Reduction::Tile(op, ty) = self else {
            return;
        };
        // (Not the lanes there: a partial warp's tile still pairs lane 0 with lane 16.)
        let width = width.clamp(1, 64);
        let mut offset = width / 2;
        while offset > 0 {
            let before: Vec<Option<u64>> = values.to_vec();
            for (lane, value) in values.iter_mut().enumerate() {
                if let Some(own) = *value {
                    let theirs = before.get(lane ^ offset).copied().flatten().unwrap_or(own);
                    *value = Some(Self::tile_op(op, ty, own, theirs));
                }
            }
            offset /= 2;
        }
    }

    /// Whether each lane's result is its own butterfly's (a tile's), not one fold for all.
    pub(crate) fn is_butterfly(self) -> bool {
        matches!(self, Reduction::Tile(..))
    }

    /// The operation of code `arg`.
    pub(crate) fn from_arg(arg: i64) -> Option<Reduction> {
        if arg >= TILE_REDUCTIONS {
            let op = [
                TileOp::Plus,
                TileOp::Less,
                TileOp::Greater,
                TileOp::BitAnd,
                TileOp::BitOr,
                TileOp::BitXor,
            ]
            .get(usize::try_from((arg - TILE_REDUCTIONS) / 4).ok()?)?;
            let ty = [WordType::I32, WordType::U32, WordType::F32, WordType::F64]
                [usize::try_from((arg - TILE_REDUCTIONS) % 4).ok()?];
            return Some(Reduction::Tile(*op, ty));
        }
        Self::ALL.get(usize::try_from(arg).ok()?).copied()
    }

    /// `values` (each the low 32 bits of a lane's word) combined in order; `None` for none.
    pub(crate) fn fold(self, values: impl Iterator<Item = u64>) -> Option<u64> {
        let words = values.map(|v| v as u32);
        let signed = |w: u32| w as i32;
        let combined = match self {
            Reduction::Add => words.reduce(u32::wrapping_add),
            Reduction::Min => words.reduce(|a, b| if signed(b) < signed(a) { b } else { a }),
            Reduction::MinUnsigned => words.reduce(u32::min),
            Reduction::Max => words.reduce(|a, b| if signed(b) > signed(a) { b } else { a }),
            Reduction::MaxUnsigned => words.reduce(u32::max),
            Reduction::And => words.reduce(|a, b| a & b),
            Reduction::Or => words.reduce(|a, b| a | b),
            Reduction::Xor => words.reduce(|a, b| a ^ b),
            // (A tile's results are each lane's own: `butterfly`.)
            Reduction::Tile(..) => None,
        };
        combined.map(u64::from)
    }
}

/// How the participants' results of a collective are computed from their operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Each lane reads another lane's value (which one: [`Collective`]'s shuffle rule).
    Shuffle,
    /// Every lane gets the same word made of the lanes' votes.
    WarpVote,
    /// Every thread of the block gets the same word made of the block's votes.
    BlockVote,
    /// Every participant gets the mask of the lanes that arrived together.
    ActiveMask,
    /// Nothing is exchanged; the block waits for the grid.
    Grid,
    /// Every lane gets the same word made of the lanes' values (`__reduce_*_sync`).
    Reduce,
}

/// One row of the table.
#[derive(Debug)]
pub(crate) struct Info {
    /// `GM_SIM_OP_*`: the operation's code in `gm_sim_runtime::collective` and `gm_sim_wait`.
    pub(crate) code: i32,
    /// The `GM_SIM_OP_*` macro's name (read by the test that checks the prelude against the
    /// table).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) macro_name: &'static str,
    /// The spelling messages use.
    pub(crate) name: &'static str,
    /// The threads it synchronizes.
    pub(crate) scope: BarrierScope,
    pub(crate) combine: Combine,
    /// The prelude's function names that kernel source calls it by and that make a thread
    /// wait in the call itself (cooperative groups' members and `__activemask`, built out of
    /// these inside the simulator's headers, are not among them).
    pub(crate) calls: &'static [&'static str],
}

impl Collective {
    /// Every operation, in code order.
    pub(crate) const ALL: [Collective; 13] = [
        Collective::Shfl,
        Collective::ShflUp,
        Collective::ShflDown,
        Collective::ShflXor,
        Collective::Ballot,
        Collective::All,
        Collective::Any,
        Collective::SyncCount,
        Collective::SyncAnd,
        Collective::SyncOr,
        Collective::Active,
        Collective::GridSync,
        Collective::Reduce,
    ];

    /// The operation's row of the table.
    pub(crate) const fn info(self) -> &'static Info {
        use BarrierScope::{Block, Warp};
        use Combine::{ActiveMask, BlockVote, Grid, Reduce, Shuffle, WarpVote};
        macro_rules! row {
            ($code:literal, $macro_name:literal, $name:literal, $scope:ident, $combine:ident, [$($call:literal),*]) => {
                &Info {
                    code: $code,
                    macro_name: $macro_name,
                    name: $name,
                    scope: $scope,
                    combine: $combine,
                    calls: &[$($call),*],
                }
            };
        }
        match self {
            Collective::Shfl => row!(
                1,
                "GM_SIM_OP_SHFL",
                "__shfl_sync",
                Warp,
                Shuffle,
                ["__shfl_sync"]
            ),
            Collective::ShflUp => row!(
                2,
                "GM_SIM_OP_SHFL_UP",
                "__shfl_up_sync",
                Warp,
                Shuffle,
                ["__shfl_up_sync"]
            ),
            Collective::ShflDown => row!(
                3,
                "GM_SIM_OP_SHFL_DOWN",
                "__shfl_down_sync",
                Warp,
                Shuffle,
                ["__shfl_down_sync"]
            ),
            Collective::ShflXor => row!(
                4,
                "GM_SIM_OP_SHFL_XOR",
                "__shfl_xor_sync",
                Warp,
                Shuffle,
                ["__shfl_xor_sync"]
            ),
            Collective::Ballot => row!(
                5,
                "GM_SIM_OP_BALLOT",
                "__ballot_sync",
                Warp,
                WarpVote,
                ["__ballot_sync"]
            ),
            Collective::All => row!(
                6,
                "GM_SIM_OP_ALL",
                "__all_sync",
                Warp,
                WarpVote,
                ["__all_sync"]
            ),
            Collective::Any => row!(
                7,
                "GM_SIM_OP_ANY",
                "__any_sync",
                Warp,
                WarpVote,
                ["__any_sync"]
            ),
            Collective::SyncCount => row!(
                8,
                "GM_SIM_OP_SYNC_COUNT",
                "syncthreads_count",
                Block,
                BlockVote,
                ["__syncthreads_count", "syncthreads_count"]
            ),
            Collective::SyncAnd => row!(
                9,
                "GM_SIM_OP_SYNC_AND",
                "syncthreads_and",
                Block,
                BlockVote,
                ["__syncthreads_and", "syncthreads_and"]
            ),
            Collective::SyncOr => row!(
                10,
                "GM_SIM_OP_SYNC_OR",
                "syncthreads_or",
                Block,
                BlockVote,
                ["__syncthreads_or", "syncthreads_or"]
            ),
            Collective::Active => {
                row!(11, "GM_SIM_OP_ACTIVE", "__activemask", Warp, ActiveMask, [])
            }
            Collective::GridSync => row!(
                12,
                "GM_SIM_OP_GRID_SYNC",
                "this_grid().sync()",
                Block,
                Grid,
                []
            ),
            Collective::Reduce => row!(
                13,
                "GM_SIM_OP_REDUCE",
                "__reduce_*_sync",
                Warp,
                Reduce,
                [
                    "__reduce_add_sync",
                    "__reduce_min_sync",
                    "__reduce_max_sync",
                    "__reduce_and_sync",
                    "__reduce_or_sync",
                    "__reduce_xor_sync",
                    "__gm_tile_reduce_sync"
                ]
            ),
        }
    }

    /// The barrier scope the operation synchronizes.
    pub fn scope(self) -> BarrierScope {
        self.info().scope
    }

    /// The spelling in kernel source, for messages.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// How the participants' results are computed.
    pub(crate) fn combine(self) -> Combine {
        self.info().combine
    }

    /// The operation for the prelude's `GM_SIM_OP_*` code.
    #[inline]
    pub(crate) fn from_code(code: i32) -> Option<Collective> {
        // Codes are 1, 2, ... in table order (a test checks it).
        let index = usize::try_from(code).ok()?.checked_sub(1)?;
        Self::ALL
            .get(index)
            .copied()
            .filter(|op| op.info().code == code)
    }

    /// The names kernel source calls collectives by, every operation's.
    pub(crate) fn calls() -> impl Iterator<Item = &'static str> {
        Self::ALL
            .iter()
            .flat_map(|op| op.info().calls.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_table_order() {
        for (index, op) in Collective::ALL.into_iter().enumerate() {
            assert_eq!(op.info().code, index as i32 + 1, "{op:?}");
            assert_eq!(Collective::from_code(op.info().code), Some(op));
        }
        assert_eq!(Collective::from_code(0), None);
        assert_eq!(Collective::from_code(-1), None);
        assert_eq!(
            Collective::from_code(Collective::ALL.len() as i32 + 1),
            None
        );
    }

    /// The prelude's `#define GM_SIM_REDUCE_*` lines are the reductions' codes, in order.
    #[test]
    #[cfg_attr(miri, ignore = "reads text only: no unsafe code to check")]
    fn the_prelude_defines_the_reductions_codes() {
        let macro_name = |r: Reduction| match r {
            Reduction::Tile(..) => "GM_SIM_REDUCE_TILE",
            Reduction::Add => "GM_SIM_REDUCE_ADD",
            Reduction::Min => "GM_SIM_REDUCE_MIN",
            Reduction::MinUnsigned => "GM_SIM_REDUCE_MIN_UNSIGNED",
            Reduction::Max => "GM_SIM_REDUCE_MAX",
            Reduction::MaxUnsigned => "GM_SIM_REDUCE_MAX_UNSIGNED",
            Reduction::And => "GM_SIM_REDUCE_AND",
            Reduction::Or => "GM_SIM_REDUCE_OR",
            Reduction::Xor => "GM_SIM_REDUCE_XOR",
        };
        for (code, reduction) in Reduction::ALL.into_iter().enumerate() {
            let line = format!("#define {} {code}", macro_name(reduction));
            assert!(
                gpu_mem_core::KERNEL_PRELUDE
                    .lines()
                    .any(|l| l.trim() == line),
                "{line}"
            );
            assert_eq!(Reduction::from_arg(code as i64), Some(reduction));
        }
        assert_eq!(Reduction::from_arg(8), None);
        assert_eq!(
            Reduction::from_arg(16 + 4 * 2 + 3),
            Some(Reduction::Tile(TileOp::Greater, WordType::F64))
        );
        assert_eq!(Reduction::from_arg(16 + 4 * 6), None);
        assert_eq!(Reduction::from_arg(-1), None);
    }

    #[test]
    fn reductions_fold_32_bit_words() {
        let words = [5u64, 0xffff_ffff, 3, 0x1_0000_0002];
        let fold = |r: Reduction| r.fold(words.iter().copied());
        assert_eq!(fold(Reduction::Add), Some(9));
        assert_eq!(fold(Reduction::Min), Some(0xffff_ffff)); // -1
        assert_eq!(fold(Reduction::MinUnsigned), Some(2));
        assert_eq!(fold(Reduction::Max), Some(5));
        assert_eq!(fold(Reduction::MaxUnsigned), Some(0xffff_ffff));
        assert_eq!(fold(Reduction::And), Some(0));
        assert_eq!(fold(Reduction::Or), Some(0xffff_ffff));
        assert_eq!(fold(Reduction::Xor), Some(5 ^ 0xffff_ffff ^ 3 ^ 2));
        assert_eq!(Reduction::Add.fold(std::iter::empty()), None);
    }

    /// A tile's butterfly gives what its shuffles give: every lane the same sum of pairs of
    /// pairs; a lane whose partner takes no part combines with itself.
    #[test]
    fn butterflies_pair_lanes_as_a_tiles_shuffles_do() {
        let word = |v: f32| Some(u64::from(v.to_bits()));
        let value = |w: Option<u64>| w.map(|w| f32::from_bits(w as u32));
        let plus = Reduction::Tile(TileOp::Plus, WordType::F32);
        let mut lanes: Vec<Option<u64>> = [1.0f32, 1e8, -1e8, 1.0].into_iter().map(word).collect();
        plus.butterfly(&mut lanes, 4);
        // ((1 + -1e8) + (1e8 + 1)) in f32, the same for every lane: 0.
        let expected = (1.0f32 + -1e8) + (1e8 + 1.0);
        assert!(
            lanes.iter().all(|&l| value(l) == Some(expected)),
            "{lanes:?}"
        );
        let mut two_tiles: Vec<Option<u64>> =
            [3.0f32, 1.0, 4.0, 2.0].into_iter().map(word).collect();
        Reduction::Tile(TileOp::Greater, WordType::F32).butterfly(&mut two_tiles, 2);
        let got: Vec<_> = two_tiles.into_iter().map(value).collect();
        assert_eq!(got, [Some(3.0), Some(3.0), Some(4.0), Some(4.0)]);
        let mut missing = vec![word(2.0), None];
        plus.butterfly(&mut missing, 2);
        assert_eq!(value(missing[0]), Some(4.0));
        let mut signed = vec![Some(u64::from((-3i32) as u32)), Some(5)];
        Reduction::Tile(TileOp::Less, WordType::I32).butterfly(&mut signed, 2);
        assert_eq!(signed, [Some(u64::from((-3i32) as u32)); 2]);
        let mut unsigned = vec![Some(u64::from((-3i32) as u32)), Some(5)];
        Reduction::Tile(TileOp::Less, WordType::U32).butterfly(&mut unsigned, 2);
        assert_eq!(unsigned, [Some(5); 2]);
    }

    /// The prelude's `#define GM_SIM_OP_*` lines are the table's codes, one for one.
    #[test]
    #[cfg_attr(miri, ignore = "reads text only: no unsafe code to check")]
    fn the_prelude_defines_the_table_codes() {
        let defines: Vec<(&str, i32)> = gpu_mem_core::KERNEL_PRELUDE
            .lines()
            .filter_map(|line| {
                let rest = line.trim().strip_prefix("#define ")?;
                let (name, value) = rest.split_once(char::is_whitespace)?;
                name.starts_with("GM_SIM_OP_")
                    .then(|| Some((name, value.trim().parse().ok()?)))?
            })
            .collect();
        assert_eq!(defines.len(), Collective::ALL.len(), "{defines:?}");
        for op in Collective::ALL {
            let info = op.info();
            assert!(
                defines.contains(&(info.macro_name, info.code)),
                "{} = {} is not in the prelude: {defines:?}",
                info.macro_name,
                info.code
            );
        }
    }

    #[test]
    fn every_block_collective_is_a_block_vote_or_the_grid() {
        for op in Collective::ALL {
            let block = matches!(op.combine(), Combine::BlockVote | Combine::Grid);
            assert_eq!(op.scope() == BarrierScope::Block, block, "{op:?}");
        }
    }
}
