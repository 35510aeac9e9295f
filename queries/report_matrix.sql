-- report_matrix: the lever matrix, each lever's change from the baseline, for the report's coloured grid
--
-- Grain: one row per device x lever x workload x metric of the latest serving run (the v_matrix view).
--
-- Key: device, lever, workload, metric
--
-- Parameters:
--   $device = null      only this device; null = all
--
-- Columns:
--   device              accelerator, catalogue name
--   lever               lever name
--   workload            workload name
--   metric              goodput | cost_per_mtok | energy_per_token | ttft_p99 | tpot_p99 | itl_p99
--   baseline_value      the baseline's value (metric's unit)
--   lever_value         the lever's value (metric's unit)
--   change_pct          %, (lever - baseline) / baseline x 100
--   verdict             better | worse | same
--   caveats             caveat marks (E, $, α, ...)
--   draws               draws of the run's [serving.bands] (null without bands)
--   share_better        share of draws in which the lever is better, 0..1 (null without bands)
--   share_worse         share of draws in which it is worse, 0..1
--   share_same          share of draws within +-2%, 0..1
--   change_p10          %, 10th percentile of the draws' change from the baseline
--   change_p50          %, median of the draws' change
--   change_p90          %, 90th percentile of the draws' change
--   verdict_text        the verdict with the share of draws agreeing, e.g. better (94%)
--   missing             why a cell has no change: no capacity (no load meets the SLOs: no cost or energy per
--                       token), baseline: no capacity, no value, no baseline value
--   share_agreeing      share of draws with the cell's verdict, 0..1 (null without bands)
--   mark                ✓ better, ✗ worse, = same; empty for a cell without a change
--   label               change and caveat marks as the seed prints them, e.g. +27% α; with [serving.bands]
--                       the share of draws agreeing with the verdict follows, e.g. +27% α (94%); a cell
--                       without a change says why, e.g. n/a (no capacity)

with cells as (
    select *,
           metric in ('goodput', 'cost_per_mtok', 'energy_per_token') as capacity_metric,
           max(lever_value) filter (where metric = 'goodput') over cell as lever_goodput,
           max(baseline_value) filter (where metric = 'goodput') over cell as baseline_goodput
    from v_matrix
    where ($device is null or device = $device)
    window cell as (partition by device, lever, workload)
),

agreeing as (
    select * replace (case when isfinite(change_pct) then change_pct end as change_pct,
                      case when isfinite(change_pct) then verdict end as verdict),
           case when coalesce(isfinite(change_pct), false) then null
                when capacity_metric and not coalesce(lever_goodput > 0, false) then 'no capacity'
                when capacity_metric and not coalesce(baseline_goodput > 0, false) then 'baseline: no capacity'
                when not isfinite(coalesce(lever_value, 'nan'::double)) then 'no value'
                else 'no baseline value' end as missing,
           case verdict when 'better' then share_better when 'worse' then share_worse
                           when 'same' then share_same end as share_agreeing
    from cells
),

final as (
    select
        * exclude (capacity_metric, lever_goodput, baseline_goodput) replace (coalesce(caveats, '') as caveats),
        case verdict when 'better' then '✓' when 'worse' then '✗' when 'same' then '=' else '' end as mark,
        case when change_pct is null or not isfinite(change_pct) then 'n/a (' || missing || ')'
             else (case when change_pct >= 0 then '+' else '' end) || round(change_pct)::bigint || '%'
                  || case when coalesce(caveats, '') = '' then '' else ' ' || caveats end
                  || case when share_agreeing is null then ''
                          else ' (' || round(100 * share_agreeing)::bigint || '%)' end end
            as label
    from agreeing
)

select * from final
order by device, lever, workload, metric
