//! State feedback: rewards the fuzzer for reaching new *abstract states*,
//! not only new lines.
//!
//! Once the corpus covers every edge of the allocator, coverage-guided
//! fuzzers have nothing left to steer by, although most combinations of
//! capacity, fill level, pending resizes and thread phases have never been
//! seen. The runners therefore describe where they are after every step as
//! an [`AbstractState`] (a few small components, each bucketed so that the
//! space stays in the thousands) and call [`observe`]. `observe` hashes the
//! state to one of [`SLOTS`] distinct functions and calls it: every engine
//! that counts edges (libFuzzer's inline 8-bit counters, AFL++'s edge map,
//! honggfuzz's PC guards) then sees a new edge for a new state, and keeps
//! the input that reached it. No engine-specific API is involved.
//!
//! With the `state-feedback` feature off (`--no-default-features`), the
//! call does nothing but record, so the same seeds can be fuzzed with and
//! without the feedback and compared. At run time, `IDPOOL_STATE_FEEDBACK=0`
//! does the same in a binary built with it: `ci/campaign.sh` merges the
//! committed corpus that way, so that it keeps only inputs that add
//! coverage, and the state-rewarded ones stay in a local pool.
//!
//! The count of distinct states is computed offline and exactly:
//! [`record`] runs a closure with a recorder that keeps every state
//! observed, which is how `triage states` replays a corpus.
//!
//! # Determinism
//!
//! Observing changes nothing in the run: the same input is the same
//! execution and the same trace.

use std::cell::RefCell;
use std::collections::BTreeSet;

/// How many distinct feedback functions the states are hashed to.
///
/// More than a minute of most targets reaches, so that a new state mostly
/// gets a new slot and libFuzzer keeps the input that reached it (with
/// 1,024, a few thousand states mostly shared one). 1,024 were kept
/// before, when 16,384 once found a planted bug more slowly
/// (docs/results/2026-12-03-feedback-experiments.md); measured again with
/// the random tail on every target, over every planted bug and finding,
/// 3 seeds (docs/results/2026-12-04-detection.md), and for the states
/// (docs/results/2026-12-04-state-feedback.md).
pub const SLOTS: usize = 16384;

/// An abstract state: components packed in mixed radix, each below its
/// declared number of classes, so two states are equal exactly when every
/// component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AbstractState {
    packed: u64,
    radix: u64,
}

impl AbstractState {
    /// The state of nothing yet, for the target called `target` (so that
    /// two targets' states never coincide in a shared recording).
    pub fn new(target: &str) -> Self {
        // FNV-1a, folded to a byte: the name only has to tell the few
        // targets apart.
        let hash = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        AbstractState {
            packed: hash % 251,
            radix: 256,
        }
    }

    /// Adds a component that takes one of `classes` values; `value` is
    /// clamped to the last class.
    ///
    /// # Panics
    ///
    /// When `classes` is 0, or when the components no longer fit in 64 bits
    /// (a state is a handful of small components).
    pub fn with(self, value: u64, classes: u64) -> Self {
        assert!(classes > 0, "a component has at least one class");
        let radix = self
            .radix
            .checked_mul(classes)
            .expect("an abstract state's components fit in 64 bits");
        AbstractState {
            packed: self.packed + self.radix * value.min(classes - 1),
            radix,
        }
    }

    /// The packed value: equal for equal states.
    pub fn key(self) -> u64 {
        self.packed
    }
}

/// The number of classes [`capacity_class`] returns.
pub const CAPACITY_CLASSES: u64 = 12;

/// A pool's capacity, bucketed: 0 (no bitmap, or disabled), then one class
/// per power of two from 64 (inline) up to 2^14, then one for everything
/// larger (deep pools, the ceiling).
pub fn capacity_class(capacity: usize) -> u64 {
    match capacity {
        0 => 0,
        1..=64 => 1,
        _ => {
            // 65..=128 -> 2, 129..=256 -> 3, ...
            let log = usize::BITS - (capacity - 1).leading_zeros();
            u64::from(log - 5).min(CAPACITY_CLASSES - 1)
        }
    }
}

/// The number of classes [`fill_class`] returns.
pub const FILL_CLASSES: u64 = 7;

/// How full a pool is, bucketed around the shrink and grow thresholds:
/// empty; below a quarter; at a quarter up to a half; up to three
/// quarters; below full but for one; one free id left; full. A capacity of
/// 0 counts as empty.
pub fn fill_class(used: usize, capacity: usize) -> u64 {
    if used == 0 || capacity == 0 {
        0
    } else if used >= capacity {
        6
    } else if used + 1 == capacity {
        5
    } else if used * 4 < capacity {
        1
    } else if used * 2 < capacity {
        2
    } else if used * 4 < capacity * 3 {
        3
    } else {
        4
    }
}

thread_local! {
    static RECORDER: RefCell<Option<BTreeSet<u64>>> = const { RefCell::new(None) };
}

/// Tells the fuzzer (and the recorder, if one runs) that the run reached
/// `state`.
#[inline]
pub fn observe(state: AbstractState) {
    RECORDER.with(|r| {
        if let Some(seen) = r.borrow_mut().as_mut() {
            seen.insert(state.key());
        }
    });
    #[cfg(feature = "state-feedback")]
    if enabled() {
        let slot = (mix(state.key()) % SLOTS as u64) as usize;
        slots::TABLE[slot]();
    }
}

/// Whether states reach the engine as edges: unless the environment says
/// `IDPOOL_STATE_FEEDBACK=0` (read once).
#[cfg(feature = "state-feedback")]
fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("IDPOOL_STATE_FEEDBACK").is_none_or(|v| v != "0"))
}

/// Runs `f` and returns its result with every state observed meanwhile on
/// this thread.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, BTreeSet<u64>) {
    let outer = RECORDER.with(|r| r.borrow_mut().replace(BTreeSet::new()));
    let result = f();
    let seen = RECORDER.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    (result, seen.unwrap_or_default())
}

/// A 64-bit finaliser (splitmix64's), so that nearby states land on
/// unrelated slots.
#[cfg(feature = "state-feedback")]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// [`SLOTS`] distinct functions. Each is its own instance of a generic
/// function that cannot be inlined, so each has its own edge in every
/// engine's coverage map.
#[cfg(feature = "state-feedback")]
mod slots {
    #[inline(never)]
    fn slot<const N: usize>() {
        std::hint::black_box(N);
    }

    macro_rules! row {
        ($base:literal) => {
            [
                slot::<{ $base * 16 }>,
                slot::<{ $base * 16 + 1 }>,
                slot::<{ $base * 16 + 2 }>,
                slot::<{ $base * 16 + 3 }>,
                slot::<{ $base * 16 + 4 }>,
                slot::<{ $base * 16 + 5 }>,
                slot::<{ $base * 16 + 6 }>,
                slot::<{ $base * 16 + 7 }>,
                slot::<{ $base * 16 + 8 }>,
                slot::<{ $base * 16 + 9 }>,
                slot::<{ $base * 16 + 10 }>,
                slot::<{ $base * 16 + 11 }>,
                slot::<{ $base * 16 + 12 }>,
                slot::<{ $base * 16 + 13 }>,
                slot::<{ $base * 16 + 14 }>,
                slot::<{ $base * 16 + 15 }>,
            ]
        };
    }

    macro_rules! table {
        ($($base:literal)*) => {
            /// One function per slot.
            pub static TABLE: [fn(); super::SLOTS] = {
                let rows: [[fn(); 16]; super::SLOTS / 16] = [$(row!($base)),*];
                let mut table: [fn(); super::SLOTS] = [slot::<0>; super::SLOTS];
                let mut i = 0;
                while i < super::SLOTS {
                    table[i] = rows[i / 16][i % 16];
                    i += 1;
                }
                table
            };
        };
    }

    table!(
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
        16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
        48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
        64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
        80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
        96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111
        112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127
        128 129 130 131 132 133 134 135 136 137 138 139 140 141 142 143
        144 145 146 147 148 149 150 151 152 153 154 155 156 157 158 159
        160 161 162 163 164 165 166 167 168 169 170 171 172 173 174 175
        176 177 178 179 180 181 182 183 184 185 186 187 188 189 190 191
        192 193 194 195 196 197 198 199 200 201 202 203 204 205 206 207
        208 209 210 211 212 213 214 215 216 217 218 219 220 221 222 223
        224 225 226 227 228 229 230 231 232 233 234 235 236 237 238 239
        240 241 242 243 244 245 246 247 248 249 250 251 252 253 254 255
        256 257 258 259 260 261 262 263 264 265 266 267 268 269 270 271
        272 273 274 275 276 277 278 279 280 281 282 283 284 285 286 287
        288 289 290 291 292 293 294 295 296 297 298 299 300 301 302 303
        304 305 306 307 308 309 310 311 312 313 314 315 316 317 318 319
        320 321 322 323 324 325 326 327 328 329 330 331 332 333 334 335
        336 337 338 339 340 341 342 343 344 345 346 347 348 349 350 351
        352 353 354 355 356 357 358 359 360 361 362 363 364 365 366 367
        368 369 370 371 372 373 374 375 376 377 378 379 380 381 382 383
        384 385 386 387 388 389 390 391 392 393 394 395 396 397 398 399
        400 401 402 403 404 405 406 407 408 409 410 411 412 413 414 415
        416 417 418 419 420 421 422 423 424 425 426 427 428 429 430 431
        432 433 434 435 436 437 438 439 440 441 442 443 444 445 446 447
        448 449 450 451 452 453 454 455 456 457 458 459 460 461 462 463
        464 465 466 467 468 469 470 471 472 473 474 475 476 477 478 479
        480 481 482 483 484 485 486 487 488 489 490 491 492 493 494 495
        496 497 498 499 500 501 502 503 504 505 506 507 508 509 510 511
        512 513 514 515 516 517 518 519 520 521 522 523 524 525 526 527
        528 529 530 531 532 533 534 535 536 537 538 539 540 541 542 543
        544 545 546 547 548 549 550 551 552 553 554 555 556 557 558 559
        560 561 562 563 564 565 566 567 568 569 570 571 572 573 574 575
        576 577 578 579 580 581 582 583 584 585 586 587 588 589 590 591
        592 593 594 595 596 597 598 599 600 601 602 603 604 605 606 607
        608 609 610 611 612 613 614 615 616 617 618 619 620 621 622 623
        624 625 626 627 628 629 630 631 632 633 634 635 636 637 638 639
        640 641 642 643 644 645 646 647 648 649 650 651 652 653 654 655
        656 657 658 659 660 661 662 663 664 665 666 667 668 669 670 671
        672 673 674 675 676 677 678 679 680 681 682 683 684 685 686 687
        688 689 690 691 692 693 694 695 696 697 698 699 700 701 702 703
        704 705 706 707 708 709 710 711 712 713 714 715 716 717 718 719
        720 721 722 723 724 725 726 727 728 729 730 731 732 733 734 735
        736 737 738 739 740 741 742 743 744 745 746 747 748 749 750 751
        752 753 754 755 756 757 758 759 760 761 762 763 764 765 766 767
        768 769 770 771 772 773 774 775 776 777 778 779 780 781 782 783
        784 785 786 787 788 789 790 791 792 793 794 795 796 797 798 799
        800 801 802 803 804 805 806 807 808 809 810 811 812 813 814 815
        816 817 818 819 820 821 822 823 824 825 826 827 828 829 830 831
        832 833 834 835 836 837 838 839 840 841 842 843 844 845 846 847
        848 849 850 851 852 853 854 855 856 857 858 859 860 861 862 863
        864 865 866 867 868 869 870 871 872 873 874 875 876 877 878 879
        880 881 882 883 884 885 886 887 888 889 890 891 892 893 894 895
        896 897 898 899 900 901 902 903 904 905 906 907 908 909 910 911
        912 913 914 915 916 917 918 919 920 921 922 923 924 925 926 927
        928 929 930 931 932 933 934 935 936 937 938 939 940 941 942 943
        944 945 946 947 948 949 950 951 952 953 954 955 956 957 958 959
        960 961 962 963 964 965 966 967 968 969 970 971 972 973 974 975
        976 977 978 979 980 981 982 983 984 985 986 987 988 989 990 991
        992 993 994 995 996 997 998 999 1000 1001 1002 1003 1004 1005 1006 1007
        1008 1009 1010 1011 1012 1013 1014 1015 1016 1017 1018 1019 1020 1021 1022 1023
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_pack_without_collisions() {
        let mut keys = BTreeSet::new();
        for a in 0..5 {
            for b in 0..7 {
                for c in 0..3 {
                    keys.insert(
                        AbstractState::new("a")
                            .with(a, 5)
                            .with(b, 7)
                            .with(c, 3)
                            .key(),
                    );
                }
            }
        }
        assert_eq!(keys.len(), 5 * 7 * 3);
        // Out of range values are clamped to the last class.
        assert_eq!(
            AbstractState::new("a").with(99, 5).key(),
            AbstractState::new("a").with(4, 5).key()
        );
        assert_ne!(AbstractState::new("a").key(), AbstractState::new("b").key());
    }

    #[test]
    fn capacity_classes_follow_powers_of_two() {
        let cases = [
            (0, 0),
            (64, 1),
            (65, 2),
            (128, 2),
            (129, 3),
            (256, 3),
            (4096, 7),
            (1 << 14, 9),
            ((1 << 14) + 1, 10),
            (1 << 15, 10),
            (1 << 16, 11),
            (1 << 30, 11),
        ];
        for (capacity, class) in cases {
            assert_eq!(capacity_class(capacity), class, "capacity {capacity}");
        }
    }

    #[test]
    fn fill_classes_split_at_the_thresholds() {
        let cases = [
            (0, 128, 0),
            (31, 128, 1),
            (32, 128, 2),
            (63, 128, 2),
            (64, 128, 3),
            (95, 128, 3),
            (96, 128, 4),
            (126, 128, 4),
            (127, 128, 5),
            (128, 128, 6),
            (3, 0, 0),
        ];
        for (used, capacity, class) in cases {
            assert_eq!(fill_class(used, capacity), class, "{used} of {capacity}");
        }
    }

    #[test]
    fn record_sees_what_was_observed_and_nests() {
        let s1 = AbstractState::new("a").with(1, 2);
        let s2 = AbstractState::new("a").with(0, 2);
        let ((), outer) = record(|| {
            observe(s1);
            let ((), inner) = record(|| observe(s2));
            assert_eq!(inner.into_iter().collect::<Vec<_>>(), vec![s2.key()]);
            observe(s1);
        });
        assert_eq!(outer.into_iter().collect::<Vec<_>>(), vec![s1.key()]);
        // No recorder: observing is harmless.
        observe(s1);
    }
}
