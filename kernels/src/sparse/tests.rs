//! CPU tests of the host 2:4 functions (`crate::sparse`): pruning's choice and its
//! properties, compression round trips with only legal metadata nibbles, the
//! metadata layout written out word by word, and the errors' messages.

use proptest::prelude::*;

use super::*;

/// Values with many zeros (both signs), repeats (ties) and both signs.
fn value() -> impl Strategy<Value = f32> {
    prop_oneof![
        3 => Just(0.0f32),
        1 => Just(-0.0f32),
        2 => Just(1.0f32),
        1 => Just(-1.0f32),
        6 => -8.0f32..8.0,
    ]
}

/// A `rows x cols` matrix of `T`, ragged sizes included.
fn matrix<T: SparseElement>(
    from_f32: fn(f32) -> T,
) -> impl Strategy<Value = (Vec<T>, usize, usize)> {
    (1usize..40, 1usize..150).prop_flat_map(move |(rows, cols)| {
        proptest::collection::vec(value(), rows * cols)
            .prop_map(move |v| (v.into_iter().map(from_f32).collect(), rows, cols))
    })
}

fn bits<T: SparseElement>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.param_bits()).collect()
}

fn pruning_properties<T: SparseElement>(dense: &[T], rows: usize, cols: usize) {
    let pruned = prune_2_4(dense, rows, cols).unwrap();
    check_2_4(&pruned, rows, cols).unwrap();
    // Every element is kept as it was or zeroed; a pruned matrix prunes to itself.
    for (p, d) in pruned.iter().zip(dense) {
        assert!(p.param_bits() == d.param_bits() || p.param_bits() == T::ZERO.param_bits());
    }
    assert_eq!(
        bits(&prune_2_4(&pruned, rows, cols).unwrap()),
        bits(&pruned)
    );
    // A dropped nonzero has two kept elements of at least its magnitude in its group.
    for r in 0..rows {
        for q in 0..cols.div_ceil(GROUP) {
            let group = r * cols + q * GROUP..r * cols + (q * GROUP + GROUP).min(cols);
            let kept = |i: usize| pruned[i].param_bits() == dense[i].param_bits();
            for i in group.clone().filter(|&i| !kept(i)) {
                let above = group
                    .clone()
                    .filter(|&j| j != i && kept(j) && dense[j].magnitude() >= dense[i].magnitude())
                    .count();
                assert!(
                    above >= 2,
                    "row {r} group {q}: column {} dropped",
                    i - r * cols
                );
            }
        }
    }
    // Compression round-trips the pruned matrix bit for bit.
    let compressed = Compressed::prune(dense, rows, cols).unwrap();
    assert_eq!(compressed.values().len(), rows * value_cols(cols));
    assert_eq!(compressed.metadata().len(), metadata_words(rows, cols));
    assert_eq!(bits(&compressed.decompress()), bits(&pruned));
    // Every nibble is one of the six legal sorted pairs.
    for word in compressed.metadata() {
        for j in 0..8 {
            let n = word >> (4 * j) & 0xf;
            assert!([0x4, 0x8, 0x9, 0xc, 0xd, 0xe].contains(&n), "nibble {n:#x}");
        }
    }
}

proptest! {
    // Each case is up to 40 x 150 elements: 64 cases keep the debug-build run short.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn f16_pruning_and_compression_round_trip((dense, rows, cols) in matrix(f16::from_f32)) {
        pruning_properties(&dense, rows, cols);
    }

    #[test]
    fn bf16_pruning_and_compression_round_trip((dense, rows, cols) in matrix(bf16::from_f32)) {
        pruning_properties(&dense, rows, cols);
    }

    /// A 2:4 matrix that pruning did not make (negative zeros anywhere)
    /// compresses and decompresses to equal values.
    #[test]
    fn any_two_four_matrix_round_trips((dense, rows, cols) in matrix(f16::from_f32)) {
        let mut sparse = dense.clone();
        for r in 0..rows {
            for q in 0..cols.div_ceil(GROUP) {
                // Zero (with its sign) all but the first two nonzeros of the group.
                let mut seen = 0;
                for c in q * GROUP..(q * GROUP + GROUP).min(cols) {
                    let x = &mut sparse[r * cols + c];
                    if x.to_f32() != 0.0 {
                        seen += 1;
                        if seen > 2 {
                            *x = f16::from_f32(if c % 2 == 0 { 0.0 } else { -0.0 });
                        }
                    }
                }
            }
        }
        let compressed = Compressed::new(&sparse, rows, cols).unwrap();
        let back = compressed.decompress();
        for (b, s) in back.iter().zip(&sparse) {
            prop_assert_eq!(b.to_f32(), s.to_f32());
        }
    }
}

#[test]
fn ties_go_to_the_lower_column_and_nan_counts_as_largest() {
    assert_eq!(kept_pair([1.0, 1.0, 1.0, 1.0]), (0, 1));
    assert_eq!(kept_pair([0.0, 2.0, 0.0, 2.0]), (1, 3));
    assert_eq!(kept_pair([3.0, 1.0, 2.0, 2.0]), (0, 2));
    assert_eq!(kept_pair([0.0, 0.0, 0.0, 5.0]), (0, 3));
    let x: Vec<f16> = [0.5, f32::NAN, -7.0, 7.0, 1.0, -0.0, 0.0, 0.0]
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let pruned: Vec<f32> = prune_2_4(&x, 1, 8)
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert!(pruned[1].is_nan());
    assert_eq!(&pruned[2..], &[-7.0, 0.0, 1.0, -0.0, 0.0, 0.0]);
    assert_eq!(pruned[0], 0.0);
    // -0.0 at position 1 ties with the zeros: the lower positions are kept.
    assert_eq!(pruned[5].to_bits(), (-0.0f32).to_bits());
}

/// The metadata layout, written out for a few groups: word `(tile * blocks
/// + block) * 32 + 4 g + 2 s + h`, row `g` in bits 0..16 and `g + 8` above.
#[test]
fn metadata_words_follow_the_mma_sp_register_layout() {
    let (rows, cols) = (20, 70);
    let mut dense = vec![f16::ZERO; rows * cols];
    let one = f16::from_f32(1.0);
    // Row 0, group 0 keeps columns 1 and 3: nibble 0xd in word 0, bits 0..4.
    dense[1] = one;
    dense[3] = one;
    // Row 8 (g = 0, upper half), group 4 (columns 16..20: s = 0, h = 1, j = 0)
    // keeps 18 and 19: nibble 0xe in word 1, bits 16..20.
    dense[8 * cols + 18] = one;
    dense[8 * cols + 19] = one;
    // Row 9 (g = 1, upper), group 13 (columns 52..56: s = 1, h = 1, j = 1)
    // keeps 54 and 55: nibble 0xe in word 4 + 3 = 7, bits 16 + 4..
    dense[9 * cols + 54] = one;
    dense[9 * cols + 55] = one;
    // Row 17 (tile 1, g = 1), column 66 (block 1, s = 0, h = 0, j = 0)
    // keeps 64 (zero) and 66: nibble 0x8 in word (1 * 2 + 1) * 32 + 4.
    dense[17 * cols + 66] = one;
    let c = Compressed::new(&dense, rows, cols).unwrap();
    let m = c.metadata();
    assert_eq!(m.len(), 2 * 2 * 32);
    assert_eq!(m[0], 0x4444_444d);
    assert_eq!(m[1], 0x444e_4444);
    assert_eq!(m[7], 0x44e4_4444);
    assert_eq!(m[3 * 32 + 4], 0x4444_4448);
    // Every other word is padding.
    let special = [0, 1, 7, 3 * 32 + 4];
    for (i, w) in m.iter().enumerate() {
        if !special.contains(&i) {
            assert_eq!(*w, 0x4444_4444, "word {i}");
        }
    }
    // Values: kept pairs in column order, zero-padded to 64 per row (32 values).
    let vcols = value_cols(cols);
    assert_eq!(vcols, 64);
    assert_eq!(c.values()[..2], [one, one]);
    assert_eq!(c.values()[8 * vcols + 8..8 * vcols + 10], [one, one]);
    assert_eq!(
        c.values()[17 * vcols + 32..17 * vcols + 34],
        [f16::ZERO, one]
    );
    assert_eq!(bits(&c.decompress()), bits(&dense));
}

#[test]
fn the_checker_names_the_first_offending_row_and_group() {
    let mut dense = vec![bf16::ZERO; 3 * 10];
    // Row 1, group 2 is columns 8..10 (a short last group): fine with 2.
    dense[10 + 8] = bf16::from_f32(1.0);
    dense[10 + 9] = bf16::from_f32(2.0);
    // Row 2, group 1 (columns 4..8) has three; row 2 group 2 too, reported second.
    for c in [4, 5, 7, 8, 9] {
        dense[20 + c] = bf16::from_f32(-1.5);
    }
    dense[20 + 6] = bf16::from_f32(0.0);
    assert_eq!(check_2_4(&dense[..20], 2, 10), Ok(()));
    assert_eq!(
        check_2_4(&dense, 3, 10).unwrap_err().to_string(),
        "the matrix is not 2:4: row 2, group 1 (columns 4..8) holds 3 nonzero values \
         [-1.5, -1.5, 0, -1.5], and a 2:4 matrix has at most 2 in every group of 4 along a \
         row; prune it first (`sparse::prune_2_4`)"
    );
    // Compression checks first.
    assert!(matches!(
        Compressed::new(&dense, 3, 10),
        Err(SparseError::NotTwoFour {
            row: 2,
            group: 1,
            nonzeros: 3,
            ..
        })
    ));
}

#[test]
fn a_wrong_length_is_an_error_naming_the_shape() {
    let dense = vec![f16::ZERO; 11];
    let message = "a 3 x 4 matrix has 12 elements, but 11 were given: pass the matrix \
                   row-major (k contiguous), rows * cols elements";
    assert_eq!(check_2_4(&dense, 3, 4).unwrap_err().to_string(), message);
    assert_eq!(prune_2_4(&dense, 3, 4).unwrap_err().to_string(), message);
    assert_eq!(
        Compressed::new(&dense, 3, 4).unwrap_err().to_string(),
        message
    );
}
