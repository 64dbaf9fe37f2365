//! The bench's report writers on a run recorded on the H200
//! (`tests/data/bench-report.json`: `gpu-bundle/bench` of 887e388 on 2026-12-02,
//! device run B1 in perf/LOG.md, only its f16 and s8 GEMMs at five shapes, the
//! stream and the sparse cases kept): the JSON
//! reads back unchanged, the medians and ratios are those of the samples,
//! and the table, the ladder and the charts are drawn from them.

use std::path::Path;

use warpforge_tests::bench::charts;
use warpforge_tests::bench::report::{
    ladder, ratio_changes, samples_seconds, table, time_spent, NotRun, Report, StepTime, Sweep,
};

fn recorded() -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/bench-report.json");
    let text = std::fs::read_to_string(&path).expect("the recorded report is in the repository");
    serde_json::from_str(&text).expect("the recorded report parses")
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[test]
fn the_json_reads_back_unchanged() {
    let report = recorded();
    let text = serde_json::to_string(&report).unwrap();
    assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), report);
}

#[test]
fn ratios_and_medians_are_those_of_the_samples() {
    let report = recorded();
    assert!(!report.cases.is_empty());
    for case in &report.cases {
        let base = &case.contenders[case.baseline].samples;
        for (contender, summary) in case.contenders.iter().zip(case.summary()) {
            let times: Vec<f64> = contender.samples.iter().map(|s| s.ms).collect();
            assert_eq!(
                summary.median_ms,
                median(times),
                "{} {}",
                case.shape,
                summary.name
            );
            // Each round's ratio divides the baseline's sample of that round.
            let ratios: Vec<f64> = contender
                .samples
                .iter()
                .map(|s| base.iter().find(|b| b.round == s.round).unwrap().ms / s.ms)
                .collect();
            assert_eq!(
                summary.ratio,
                median(ratios.clone()),
                "{} {}",
                case.shape,
                summary.name
            );
            // Seven rounds: the 95% interval of the median is the whole range
            // (rank 1 covers 1 - 2/128; rank 2 only 1 - 16/128).
            assert_eq!(summary.rounds, 7);
            let lowest = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let highest = ratios.iter().copied().fold(0.0, f64::max);
            assert_eq!(summary.ratio_interval, Some((lowest, highest)));
        }
    }
}

#[test]
fn the_table_and_the_ladder_show_every_case() {
    let report = recorded();
    let text = table(&report);
    assert!(text.contains(&report.gpu), "{text}");
    for case in &report.cases {
        assert!(text.contains(&format!("### {} {}", case.section, case.dtype)));
        for summary in case.summary() {
            let row = format!(
                "| {} | {} | {:.4} |",
                case.shape, summary.name, summary.median_ms
            );
            assert!(text.contains(&row), "missing row {row} in\n{text}");
        }
    }
    let gemm_shape = report
        .cases
        .iter()
        .find(|c| c.section == "gemm")
        .map(|c| c.shape.clone())
        .expect("the recorded run has GEMM cases");
    let rows = ladder(&report, &gemm_shape).expect("a GEMM case at its own shape");
    for case in report
        .cases
        .iter()
        .filter(|c| c.section == "gemm" && c.shape == gemm_shape)
    {
        assert!(rows.contains(&format!("| {} |", case.dtype)), "{rows}");
    }
}

#[test]
fn a_run_without_gemm_cases_has_no_ladder_and_no_charts() {
    let mut report = recorded();
    report.cases.retain(|c| c.section != "gemm");
    assert!(
        !report.cases.is_empty(),
        "the recorded run has other sections"
    );
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(ladder(&report, "8192x8192x8192"), None);
    let written = charts::write_all(&report, dir.path(), "8192x8192x8192").unwrap();
    assert!(written.is_empty(), "{written:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn the_charts_are_drawn_as_svg_and_png() {
    let report = recorded();
    let dir = tempfile::tempdir().unwrap();
    let shape = report
        .cases
        .iter()
        .find(|c| c.section == "gemm")
        .map(|c| c.shape.clone())
        .unwrap();
    let written = charts::write_all(&report, dir.path(), &shape).unwrap();
    assert_eq!(written.len(), 6, "{written:?}");
    for path in &written {
        let bytes = std::fs::read(path).unwrap();
        match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => {
                let svg = String::from_utf8(bytes).unwrap();
                assert!(svg.contains("<text"), "{} has no text", path.display());
                assert!(
                    svg.contains("<polyline") || svg.contains("<rect"),
                    "{}",
                    path.display()
                );
            }
            Some("png") => {
                let image = image::load_from_memory(&bytes).unwrap().to_rgb8();
                assert_eq!(image.dimensions(), (1200, 800));
                // Not blank: drawn pixels (text, axes, series) beside the white.
                let drawn = image.pixels().filter(|p| p.0 != [255, 255, 255]).count();
                assert!(drawn > 5_000, "{} has {drawn} drawn pixels", path.display());
            }
            _ => panic!("unexpected chart file {}", path.display()),
        }
    }
}

#[test]
fn cases_nothing_runs_are_listed_not_measured() {
    let mut report = recorded();
    // Recorded before the list existed: it reads back empty.
    assert!(report.not_run.is_empty());
    report.not_run.push(NotRun {
        case: "gemm E4m3 3001x2999x1000".into(),
        why:
            "cuBLAS: n and k must be multiples of 16; warpforge sm_90a: no variant takes the shape"
                .into(),
    });
    let text = table(&report);
    let listed = text.split("### not run").nth(1).expect("a not-run section");
    assert!(
        listed.contains("- gemm E4m3 3001x2999x1000: cuBLAS: n and k must be multiples of 16"),
        "{text}"
    );
    let json = serde_json::to_string(&report).unwrap();
    assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), report);
}

#[test]
fn two_runs_are_compared_ratio_by_ratio() {
    let first = recorded();
    let same = ratio_changes(&first, &first);
    let ratios: usize = first.cases.iter().map(|c| c.contenders.len() - 1).sum();
    assert_eq!(same.len(), ratios);
    assert!(same.iter().all(|c| c.change == 0.0 && c.same_detail));

    // The second run: one contender 5% faster in every round, another variant.
    let mut second = first.clone();
    let case = second
        .cases
        .iter_mut()
        .find(|c| c.section == "gemm" && c.contenders.len() > 2)
        .unwrap();
    let moved = if case.baseline == 0 { 1 } else { 0 };
    for sample in &mut case.contenders[moved].samples {
        sample.ms /= 1.05;
    }
    case.contenders[moved].detail = "another variant".into();
    let name = case.contenders[moved].name.clone();
    let changes = ratio_changes(&first, &second);
    assert_eq!(changes.len(), ratios);
    assert_eq!(changes[0].contender, name);
    assert!((changes[0].change - 0.05).abs() < 1e-9, "{:?}", changes[0]);
    assert!(!changes[0].same_detail);
    assert!(changes[1..].iter().all(|c| c.change == 0.0));
    // Each run's interval: the moved one's is 5% higher, every round's
    // ratio having moved by as much; a ratio that did not move lies within
    // its own.
    let [Some(before), Some(after)] = changes[0].intervals else {
        panic!("the recorded case has 6 rounds or more: {:?}", changes[0]);
    };
    assert!((after.0 / before.0 - 1.05).abs() < 1e-9 && (after.1 / before.1 - 1.05).abs() < 1e-9);
    let apart = before.1 < after.0;
    assert_eq!(changes[0].intervals_overlap(), Some(!apart));
    assert!(changes[1..]
        .iter()
        .all(|c| c.intervals_overlap() != Some(false)));
    // The recorded run kept no sweeps: nothing to say of the choice.
    assert_eq!(changes[0].choice, None);

    // With each run's sweep, the note gives both variants' samples in each.
    let at = second
        .cases
        .iter()
        .position(|c| c.contenders[moved].detail == "another variant")
        .unwrap();
    let mut first = first;
    let old_detail = first.cases[at].contenders[moved].detail.clone();
    let sweep = |chosen: &str, old_ms: f64, new_ms: f64| Sweep {
        chosen: chosen.into(),
        sampled: vec![
            (old_detail.clone(), old_ms),
            ("another variant".into(), new_ms),
        ],
        finalists: vec![],
    };
    first.cases[at].sweeps = vec![sweep(&old_detail, 1.0, 1.2)];
    second.cases[at].sweeps = vec![sweep("another variant", 1.1, 1.05)];
    let choice = ratio_changes(&first, &second)[0].choice.clone().unwrap();
    assert!(
        choice.contains("first run 1.0000 ms / 1.2000 ms")
            && choice.contains("second run 1.1000 ms / 1.0500 ms"),
        "{choice}"
    );
}

#[test]
fn the_roofline_draws_each_dtype_s_compute_ceilings_from_the_mma_section() {
    let mut report = recorded();
    let recorded = report.clone();
    let gemm_8192 = |dtype: &str| {
        recorded
            .cases
            .iter()
            .find(|c| c.section == "gemm" && c.dtype == dtype && c.shape == "8192x8192x8192")
            .unwrap()
            .clone()
    };
    // Recorded samples as the rates: f16's `mma.sync` and `wgmma` from the
    // 8192^3 GEMM's sm_80 and sm_90a paths; s8's `wgmma` only (an `mma`
    // case where `mma.sync` is absent), beside a sparse rate, which is
    // not a ceiling of a dense GEMM.
    let mut ceilings = Vec::new();
    for (dtype, rates) in [
        (
            "f16",
            vec![
                ("warpforge sm_80", "mma.sync"),
                ("warpforge sm_90a", "wgmma"),
            ],
        ),
        (
            "s8",
            vec![("warpforge sm_90a", "wgmma"), ("warpforge sm_80", "mma.sp")],
        ),
    ] {
        let mut case = gemm_8192(dtype);
        case.section = "mma".into();
        case.shape = "register-bound loops".into();
        case.dims = None;
        case.baseline = 0;
        case.sweeps.clear();
        case.contenders = rates
            .iter()
            .map(|(path, instruction)| {
                let mut c = case
                    .contenders
                    .iter()
                    .find(|c| c.name == *path)
                    .unwrap()
                    .clone();
                c.name = instruction.to_string();
                c
            })
            .collect();
        for s in case.summary() {
            ceilings.push((dtype, s.name, s.rate));
        }
        report.cases.push(case);
    }
    let dir = tempfile::tempdir().unwrap();
    charts::write_all(&report, dir.path(), "8192x8192x8192").unwrap();
    let svg = std::fs::read_to_string(dir.path().join("roofline.svg")).unwrap();
    for (dtype, name, rate) in &ceilings {
        let unit = if *dtype == "s8" { "TOP/s" } else { "TFLOP/s" };
        let label = format!("{name} ceiling: {rate:.0} {unit} measured");
        assert_eq!(
            svg.contains(&label),
            name != "mma.sp",
            "{dtype}: {label} in the roofline: {}",
            name != "mma.sp"
        );
    }
    // One panel per GEMM dtype.
    assert!(svg.contains("f16 GEMM roofline") && svg.contains("s8 GEMM roofline"));
    assert_eq!(svg.matches("mma.sync ceiling: ").count(), 1, "f16's");
    assert_eq!(svg.matches("wgmma ceiling: ").count(), 2, "f16's and s8's");
}

#[test]
fn the_run_s_time_is_split_by_section_and_part() {
    let mut report = recorded();
    assert_eq!(
        time_spent(&report),
        None,
        "the recorded run kept no step times"
    );
    // Each sample's GPU time is its launches' (ms per launch times launches).
    let first = &report.cases[0];
    let launches_ms: Vec<f64> = first
        .contenders
        .iter()
        .flat_map(|c| &c.samples)
        .map(|s| s.ms * f64::from(s.launches))
        .collect();
    let expected_s = launches_ms.iter().sum::<f64>() / 1e3;
    assert!(expected_s > 0.0);
    assert!((samples_seconds(std::slice::from_ref(first)) - expected_s).abs() < 1e-9);
    let step = |section: &str, step: &str, total_s, parts: [f64; 4]| StepTime {
        section: section.into(),
        step: step.into(),
        total_s,
        sweeps_s: parts[0],
        checks_s: parts[1],
        rounds_s: parts[2],
        samples_s: parts[3],
    };
    report.steps = vec![
        step("stream", "stream", 3.0, [1.0, 0.5, 1.25, 0.75]),
        step("gemm", "gemm: loading", 10.0, [0.0; 4]),
        step(
            "gemm",
            "gemm F16 8192x8192x8192",
            20.0,
            [8.0, 2.0, 5.0, 2.5],
        ),
    ];
    let text = time_spent(&report).expect("step times");
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 5, "{text}");
    let cells =
        |row: &str| -> Vec<String> { row.split('|').map(|c| c.trim().to_string()).collect() };
    let share = |s: f64, total: f64| format!("{s:.1} ({:.0}%)", 100.0 * s / total);
    let run = cells(rows[4]);
    assert_eq!(&run[1..4], ["**run**", "3", "33.0"]);
    let parts = [6.25, 3.25, 9.0, 2.5];
    // The rest: the loading step, and what each step spent outside its parts.
    let rest = 33.0 - 6.25 - 9.0 - 2.5;
    for (cell, part) in run[4..9].iter().zip(parts.iter().chain([&rest])) {
        assert_eq!(*cell, share(*part, 33.0), "{text}");
    }
    let gemm = cells(rows[3]);
    assert_eq!(&gemm[1..5], ["gemm", "2", "30.0", &share(5.0, 30.0)]);
    let stream = cells(rows[2]);
    assert_eq!(&stream[1..4], ["stream", "1", "3.0"]);
    assert!(table(&report).contains(&text), "the table carries it");
}
