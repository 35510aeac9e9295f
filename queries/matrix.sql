-- matrix: every lever's change from the baseline, per device x workload x metric (the chapter's lever tables)
--
-- Grain: one row per device x lever x workload x metric of one serving run (levers other than the baseline).
-- Capacity metrics (goodput, cost_per_mtok, energy_per_token) at each configuration's capacity; latencies at
-- the workload's reference load (0.5 x the H100 baseline capacity; the same offered load for every lever and
-- device). The baseline is the same device's baseline lever on the same workload. A run whose grid has
-- [serving.bands] adds, per cell, the share of its draws in which the lever is better, worse or the same
-- (lever and baseline under the same draw; docs/serving.md) and the draws' p10 / p50 / p90 change.
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
--   draws             draws of the run's [serving.bands] compared (null without bands)
--   share_better      share of draws in which the lever is better than the baseline under the same draw, 0..1
--   share_worse       share of draws in which it is worse, 0..1 (null without bands)
--   share_same        share of draws within +-$same_pct %, 0..1 (null without bands)
--   change_p10        %, 10th percentile over the draws of the change from the baseline (null without bands)
--   change_p50        %, median of the draws' changes
--   change_p90        %, 90th percentile of the draws' changes
--   verdict_text      the verdict with the share of draws that agree with it, e.g. better (94%); the verdict
--                     alone without bands
--   missing           why change_pct is null: no capacity (no load meets the SLOs, so there is no cost or
--                     energy per token), baseline: no capacity, no value, no baseline value; null when the
--                     change is given

with long as (
    from capacity_long($run_id)
    where in_matrix and ($device is null or device = $device)
),

paired as (
    select l.device, l.lever, l.workload, l.metric, l.unit, l.ord, l.draft, l.capacity_metric,
           l.higher_is_better, b.value as baseline_value, l.value as lever_value,
           case when l.saturated then l.goodput_per_gpu_per_s > 0
                                      and l.goodput_per_gpu_per_s >= 2 * b.goodput_per_gpu_per_s
                else l.capacity_per_s > 0 and l.capacity_per_s >= 2 * b.capacity_per_s end as doubles,
           case when isfinite(l.value) and isfinite(b.value) and b.value <> 0
                then (l.value - b.value) / b.value * 100 end as change_pct,
           -- why a cell has no change: a configuration without capacity has no cost or energy per token
           case when isfinite(l.value) and isfinite(b.value) and b.value <> 0 then null
                when l.capacity_metric and not coalesce(l.goodput_per_gpu_per_s > 0, false) then 'no capacity'
                when l.capacity_metric and not coalesce(b.goodput_per_gpu_per_s > 0, false)
                then 'baseline: no capacity'
                when not isfinite(coalesce(l.value, 'nan'::double)) then 'no value'
                else 'no baseline value' end as missing
    from long l
    join long b on b.device = l.device and b.workload = l.workload and b.metric = l.metric and b.lever = $baseline
    where l.lever <> $baseline
),

drawn as (
    from draws_long($run_id)
    where in_matrix and ($device is null or device = $device)
),

draw_verdicts as (
    select l.device, l.lever, l.workload, l.metric, l.draw,
           case when isfinite(l.value) and isfinite(b.value) and b.value <> 0
                then (l.value - b.value) / b.value * 100 end as change_pct,
           verdict_of(case when isfinite(l.value) and isfinite(b.value) and b.value <> 0
                           then (l.value - b.value) / b.value * 100 end, l.higher_is_better, $same_pct) as verdict
    from drawn l
    join drawn b on b.device = l.device and b.workload = l.workload and b.metric = l.metric and b.draw = l.draw
                and b.lever = $baseline
    where l.lever <> $baseline
),

shares as (
    select device, lever, workload, metric,
           count(*) as draws,
           count(*) filter (where verdict = 'better') / count(*) as share_better,
           count(*) filter (where verdict = 'worse') / count(*) as share_worse,
           count(*) filter (where verdict = 'same') / count(*) as share_same,
           quantile_cont(change_pct, 0.1) as change_p10,
           quantile_cont(change_pct, 0.5) as change_p50,
           quantile_cont(change_pct, 0.9) as change_p90
    from draw_verdicts
    group by all
),

cells as (
    select p.*, verdict_of(p.change_pct, p.higher_is_better, $same_pct) as verdict,
           s.draws, s.share_better, s.share_worse, s.share_same, s.change_p10, s.change_p50, s.change_p90
    from paired p
    left join shares s using (device, lever, workload, metric)
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
        verdict,
        concat(case when capacity_metric and doubles then 'E' else '' end,
               case when metric = 'cost_per_mtok' then '$' else '' end,
               case when draft <> 'none' then 'α' else '' end) as caveats,
        draws,
        share_better,
        share_worse,
        share_same,
        change_p10,
        change_p50,
        change_p90,
        case when draws is null or verdict is null then verdict
             else verdict || ' (' || round(100 * case verdict when 'better' then share_better
                                                              when 'worse' then share_worse
                                                              else share_same end)::bigint || '%)' end
            as verdict_text,
        missing
    from cells
)

select * from final
order by workload, device, lever, (select ord from metric_catalogue() as m where m.metric = final.metric)
