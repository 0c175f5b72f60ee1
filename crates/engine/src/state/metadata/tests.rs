use super::*;

fn entry<'a>(family_name: &'a str, help: &'a str, unit: &'a str) -> MetadataRef<'a> {
    MetadataRef {
        metric_type: MetricType::Counter,
        family_name,
        help,
        unit,
    }
}

#[test]
fn a_metadata_bomb_of_7_5_mib_help_texts_is_not_cached_and_the_cache_stays_a_few_kib() {
    // Issue 32: 7.5 MiB help texts for the read families took the process from 9 to 260 MiB.
    let bomb = "h".repeat(7 * 1024 * 1024 + 512 * 1024);
    let families = [
        "vllm:generation_tokens",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:request_time_per_output_token_seconds",
    ];
    let mut cache = MetadataCache::default();
    for family in families {
        assert_eq!(
            cache.record(&entry(family, &bomb, ""), crate::DEFAULT_METRIC_PREFIX),
            Err(MetadataDropReason::TooLong)
        );
    }
    assert_eq!((cache.len(), cache.text_bytes()), (0, 0));
    // At the caps every entry is kept: its name, 4096 help bytes and 256 unit bytes.
    let help = "h".repeat(4096);
    let unit = "u".repeat(256);
    for family in families {
        assert_eq!(
            cache.record(&entry(family, &help, &unit), crate::DEFAULT_METRIC_PREFIX),
            Ok(())
        );
    }
    let names: usize = families.iter().map(|f| f.len()).sum();
    assert_eq!(cache.len(), 4);
    assert_eq!(cache.text_bytes(), names + 4 * (4096 + 256));
    // A unit one byte past its cap is refused too, and the entry cached before stays.
    let long_unit = "u".repeat(257);
    assert_eq!(
        cache.record(
            &entry(families[0], "short", &long_unit),
            crate::DEFAULT_METRIC_PREFIX
        ),
        Err(MetadataDropReason::TooLong)
    );
    assert_eq!(cache.text_bytes(), names + 4 * (4096 + 256));
}

#[test]
fn metadata_of_families_no_rule_reads_is_ignored_whatever_its_size() {
    let mut cache = MetadataCache::default();
    let bomb = "h".repeat(1 << 20);
    assert_eq!(
        cache.record(
            &entry("vllm:num_requests_running", &bomb, ""),
            crate::DEFAULT_METRIC_PREFIX
        ),
        Ok(())
    );
    assert_eq!(cache.len(), 0);
}
