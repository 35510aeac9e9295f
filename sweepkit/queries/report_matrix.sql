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
--   share_agreeing      share of draws with the cell's verdict, 0..1 (null without bands)
--   mark                ✓ better, ✗ worse, = same
--   label               change and caveat marks as the seed prints them, e.g. +27% α; with [serving.bands]
--                       the share of draws agreeing with the verdict follows, e.g. +27% α (94%)

with cells as (
    select *
    from v_matrix
    where ($device is null or device = $device)
),

agreeing as (
    select *, case verdict when 'better' then share_better when 'worse' then share_worse
                           when 'same' then share_same end as share_agreeing
    from cells
),

final as (
    select
        * replace (coalesce(caveats, '') as caveats),
        case verdict when 'better' then '✓' when 'worse' then '✗' else '=' end as mark,
        case when change_pct is null then 'n/a'
             else (case when change_pct >= 0 then '+' else '' end) || round(change_pct)::bigint || '%' end
            || case when coalesce(caveats, '') = '' then '' else ' ' || caveats end
            || case when share_agreeing is null then '' else ' (' || round(100 * share_agreeing)::bigint || '%)' end
            as label
    from agreeing
)

select * from final
order by device, lever, workload, metric
