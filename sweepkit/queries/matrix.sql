-- matrix: every lever's change from the baseline, per device x workload x metric (the chapter's lever tables)
--
-- Grain: one row per device x lever x workload x metric of one serving run (levers other than the baseline).
-- Capacity metrics (goodput, cost_per_mtok, energy_per_token) at each configuration's capacity; latencies at
-- the workload's reference load (0.5 x the H100 baseline capacity; the same offered load for every lever and
-- device). The baseline is the same device's baseline lever on the same workload.
--
-- Key: device, lever, workload, metric
--
-- Parameters:
--   $run_id = latest       serving run to read; latest = the newest committed serving run
--   $device = null         only this device; null = all
--   $baseline = baseline   the lever every other lever is compared with
--   $same_pct = 2.0        |change| <= this (%) is "same"
--
-- Columns:
--   device            accelerator, catalogue name
--   lever             lever name
--   workload          workload name
--   metric            goodput | cost_per_mtok | energy_per_token | ttft_p99 | tpot_p99 | itl_p99
--   unit              the metric's unit (req/s per GPU, USD per M tokens, J per token, s)
--   baseline_value    the baseline's value
--   lever_value       the lever's value
--   change_pct        %, (lever - baseline) / baseline x 100
--   verdict           better | worse | same (beyond +-$same_pct %; higher is better for goodput only)
--   caveats           E (capacity at least doubles: the baseline sits at a latency cliff; capacity metrics),
--                     $ (illustrative prices; cost), α (speculative acceptance assumed, not measured)

with long as (
    from capacity_long($run_id)
    where in_matrix and ($device is null or device = $device)
),

paired as (
    select l.device, l.lever, l.workload, l.metric, l.unit, l.ord, l.draft, l.capacity_metric,
           l.higher_is_better, b.value as baseline_value, l.value as lever_value,
           case when l.saturated then l.goodput_per_gpu_per_s >= 2 * b.goodput_per_gpu_per_s
                else l.capacity_per_s >= 2 * b.capacity_per_s end as doubles,
           (l.value - b.value) / nullif(b.value, 0) * 100 as change_pct
    from long l
    join long b on b.device = l.device and b.workload = l.workload and b.metric = l.metric and b.lever = $baseline
    where l.lever <> $baseline
),

final as (
    select
        device,
        lever,
        workload,
        metric,
        unit,
        baseline_value,
        lever_value,
        change_pct,
        case when change_pct is null then null
             when abs(change_pct) <= $same_pct then 'same'
             when (change_pct > 0) = higher_is_better then 'better'
             else 'worse' end as verdict,
        concat(case when capacity_metric and doubles then 'E' else '' end,
               case when metric = 'cost_per_mtok' then '$' else '' end,
               case when draft <> 'none' then 'α' else '' end) as caveats
    from paired
)

select * from final
order by workload, device, lever, (select ord from metric_catalogue() as m where m.metric = final.metric)
