//! Between wire messages and the engine's types. Every conversion from the wire checks what
//! it reads: a value the engine would reject is an [`RpcError::Invalid`], never a panic.

use sluice_exec::CompactionMode;
use sluice_sst::compaction_iter::CompactionIterStats;
use sluice_sst::compression::CompressionType;
use sluice_sst::prefix::PrefixExtractor;
use sluice_sst::profile::{StageProfile, StageTiming, Step};
use sluice_sst::table::TableOptions;

use crate::RpcError;
use crate::proto;

/// The table format of `o`, for the wire.
pub fn table_format(o: &TableOptions) -> proto::TableFormat {
    proto::TableFormat {
        block_size: u32::try_from(o.block_size).unwrap_or(u32::MAX),
        block_restart_interval: u32::try_from(o.restart_interval).unwrap_or(u32::MAX),
        compression: o.compression as u32,
        zstd_level: o.zstd_level,
        bloom_bits_per_key: o.bloom_bits_per_key,
        prefix_extractor: o.prefix_extractor.map(|e| e.name()).unwrap_or_default(),
    }
}

/// The table options a task asks for, checked as the engine checks its own.
pub fn table_options(f: &proto::TableFormat) -> Result<TableOptions, RpcError> {
    let compression = u8::try_from(f.compression)
        .ok()
        .and_then(CompressionType::from_u8)
        .ok_or_else(|| RpcError::Invalid(format!("unknown compression {}", f.compression)))?;
    let o =
        TableOptions {
            block_size: f.block_size as usize,
            restart_interval: f.block_restart_interval as usize,
            compression,
            zstd_level: f.zstd_level,
            bloom_bits_per_key: f.bloom_bits_per_key,
            prefix_extractor: match f.prefix_extractor.as_str() {
                "" => None,
                name => Some(PrefixExtractor::from_name(name).ok_or_else(|| {
                    RpcError::Invalid(format!("unknown prefix extractor {name:?}"))
                })?),
            },
        };
    o.validate()
        .map_err(|e| RpcError::Invalid(format!("table format: {e}")))?;
    Ok(o)
}

/// The wire value of an executor; `None` asks the receiver's decision component to choose.
pub fn mode_to_wire(mode: Option<CompactionMode>) -> proto::ExecutorMode {
    use proto::ExecutorMode as W;
    match mode {
        None | Some(CompactionMode::Auto) => W::Decide,
        Some(CompactionMode::Sequential) => W::Sequential,
        Some(CompactionMode::Pipelined) => W::Pipelined,
        Some(CompactionMode::Parallel) => W::Parallel,
        Some(CompactionMode::Streaming) => W::Streaming,
    }
}

/// The executor a wire value names; `None` for "decide".
pub fn mode_from_wire(value: i32) -> Result<Option<CompactionMode>, RpcError> {
    use proto::ExecutorMode as W;
    match W::try_from(value) {
        Ok(W::Sequential) => Ok(Some(CompactionMode::Sequential)),
        Ok(W::Pipelined) => Ok(Some(CompactionMode::Pipelined)),
        Ok(W::Parallel) => Ok(Some(CompactionMode::Parallel)),
        Ok(W::Streaming) => Ok(Some(CompactionMode::Streaming)),
        Ok(W::Decide) => Ok(None),
        Ok(W::Unspecified) | Err(_) => {
            Err(RpcError::Invalid(format!("unknown executor mode {value}")))
        }
    }
}

/// A stage profile, for the wire.
pub fn profile_to_wire(p: &StageProfile) -> proto::StepProfile {
    proto::StepProfile {
        step_nanos: p.step_nanos.to_vec(),
        bytes_read: p.bytes_read,
        bytes_written: p.bytes_written,
        entries_in: p.entries_in,
        entries_out: p.entries_out,
        wall_nanos: p.wall_nanos,
        cpu_nanos: p.cpu_nanos,
    }
}

/// A stage profile from the wire: exactly one time per step.
pub fn profile_from_wire(p: &proto::StepProfile) -> Result<StageProfile, RpcError> {
    let step_nanos: [u64; Step::ALL.len()] = p.step_nanos.as_slice().try_into().map_err(|_| {
        RpcError::Invalid(format!(
            "a profile has {} step times, not {}",
            p.step_nanos.len(),
            Step::ALL.len()
        ))
    })?;
    Ok(StageProfile {
        step_nanos,
        bytes_read: p.bytes_read,
        bytes_written: p.bytes_written,
        entries_in: p.entries_in,
        entries_out: p.entries_out,
        wall_nanos: p.wall_nanos,
        cpu_nanos: p.cpu_nanos,
    })
}

/// Executor stage timings, for the wire.
pub fn stages_to_wire(stages: &[StageTiming]) -> Vec<proto::StageTiming> {
    stages
        .iter()
        .map(|s| proto::StageTiming {
            stage: s.stage.clone(),
            threads: s.threads,
            busy_nanos: s.busy_nanos,
            idle_nanos: s.idle_nanos,
        })
        .collect()
}

/// Executor stage timings from the wire.
pub fn stages_from_wire(stages: &[proto::StageTiming]) -> Vec<StageTiming> {
    stages
        .iter()
        .map(|s| StageTiming {
            stage: s.stage.clone(),
            threads: s.threads,
            busy_nanos: s.busy_nanos,
            idle_nanos: s.idle_nanos,
        })
        .collect()
}

/// What a compaction dropped, for the wire.
pub fn stats_to_wire(s: &CompactionIterStats) -> proto::DropStats {
    proto::DropStats {
        entries_in: s.entries_in,
        entries_out: s.entries_out,
        shadowed_dropped: s.shadowed_dropped,
        tombstones_dropped: s.tombstones_dropped,
        input_key_bytes: s.input_key_bytes,
        input_value_bytes: s.input_value_bytes,
        dropped_digest: s.dropped_digest,
        seqs_zeroed: s.seqs_zeroed,
        rewrite_digest: s.rewrite_digest,
        filter_removed: s.filter_removed,
        filter_changed: s.filter_changed,
        merge_absorbed: s.merge_absorbed,
        range_covered: s.range_covered,
    }
}

/// What a compaction dropped, from the wire.
pub fn stats_from_wire(s: &proto::DropStats) -> CompactionIterStats {
    CompactionIterStats {
        entries_in: s.entries_in,
        entries_out: s.entries_out,
        shadowed_dropped: s.shadowed_dropped,
        tombstones_dropped: s.tombstones_dropped,
        input_key_bytes: s.input_key_bytes,
        input_value_bytes: s.input_value_bytes,
        dropped_digest: s.dropped_digest,
        seqs_zeroed: s.seqs_zeroed,
        rewrite_digest: s.rewrite_digest,
        filter_removed: s.filter_removed,
        filter_changed: s.filter_changed,
        merge_absorbed: s.merge_absorbed,
        range_covered: s.range_covered,
        // Workers never collect blob files: a spec that does runs on the host.
        blob_values_relocated: 0,
        blob_bytes_relocated: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_options_round_trip_and_are_checked() {
        let o = TableOptions {
            compression: CompressionType::Zstd,
            zstd_level: 5,
            prefix_extractor: Some(PrefixExtractor::Capped(4)),
            ..TableOptions::default()
        };
        assert_eq!(table_options(&table_format(&o)).unwrap(), o);
        let plain = TableOptions::default();
        assert_eq!(table_options(&table_format(&plain)).unwrap(), plain);
        let mut bad = table_format(&o);
        bad.compression = 9;
        assert!(table_options(&bad).is_err());
        let mut bad = table_format(&o);
        bad.block_size = 0;
        assert!(table_options(&bad).is_err());
        for name in ["fixed:0", "reverse:3"] {
            let mut bad = table_format(&o);
            bad.prefix_extractor = name.into();
            assert!(table_options(&bad).is_err(), "{name}");
        }
    }

    #[test]
    fn modes_round_trip() {
        for m in CompactionMode::ALL {
            assert_eq!(
                mode_from_wire(mode_to_wire(Some(m)) as i32).unwrap(),
                Some(m)
            );
        }
        assert_eq!(mode_from_wire(mode_to_wire(None) as i32).unwrap(), None);
        assert!(mode_from_wire(0).is_err());
        assert!(mode_from_wire(77).is_err());
    }

    #[test]
    fn profiles_round_trip_and_need_seven_steps() {
        let p = StageProfile {
            step_nanos: [1, 2, 3, 4, 5, 6, 7],
            bytes_read: 10,
            bytes_written: 9,
            entries_in: 8,
            entries_out: 7,
            wall_nanos: 100,
            cpu_nanos: 90,
        };
        assert_eq!(profile_from_wire(&profile_to_wire(&p)).unwrap(), p);
        let mut short = profile_to_wire(&p);
        short.step_nanos.pop();
        assert!(profile_from_wire(&short).is_err());
        let s = CompactionIterStats {
            entries_in: 5,
            shadowed_dropped: 2,
            ..CompactionIterStats::default()
        };
        assert_eq!(stats_from_wire(&stats_to_wire(&s)), s);
    }
}
