//! The NAT lab's cases in virtual time, beside what `braid bench reach`
//! measured in the lab (docs/results/reach.json, the medians of its
//! runs): the same transfers complete, the direct path opens in the same
//! cases and as soon, and data flows and goodput agree within 10 %.

use braid_sim::reach::{markdown, run_lab_cases};
use serde_json::Value;

const LAB: &str = include_str!("../../../docs/results/reach.json");

fn within(sim: f64, lab: f64, tolerance: f64) -> bool {
    (sim - lab).abs() <= tolerance * lab.abs()
}

#[test]
fn the_labs_cases_in_virtual_time_agree_with_the_lab() {
    let lab: Value = serde_json::from_str(LAB).unwrap();
    let medians = lab["medians"].as_array().unwrap();
    let bytes = lab["size"].as_u64().unwrap_or(20_000_000);
    let rows = run_lab_cases(bytes, 1);
    let table = markdown(&rows);
    let mut compared = 0;
    for (name, sim) in &rows {
        let Some(m) = medians.iter().find(|m| m["case"] == *name) else {
            continue;
        };
        compared += 1;
        let say = format!("{name}: sim {sim:?}, lab {m}\n{table}");
        assert!(sim.verified, "{say}");
        let lab_direct = m["direct_share"].as_f64().unwrap_or(0.0) > 0.0;
        let sim_direct = sim.share_direct.unwrap_or(0.0) > 0.0;
        assert_eq!(sim_direct, lab_direct, "direct path: {say}");
        let goodput = m["goodput_mbps"].as_f64().unwrap();
        assert!(
            within(sim.goodput_mbps.unwrap(), goodput, 0.10),
            "goodput: {say}"
        );
        if let Some(to_data) = m["to_data_s"].as_f64() {
            assert!(
                within(sim.to_data_s.unwrap(), to_data, 0.10),
                "to data: {say}"
            );
        }
        if let Some(validated) = m["validated_ms"].as_f64() {
            let sim_validated = sim.validated_ms.expect("validated in the lab");
            assert!(within(sim_validated, validated, 0.10), "validated: {say}");
        }
    }
    assert!(
        compared >= 12,
        "only {compared} cases found in the lab's results"
    );
}
