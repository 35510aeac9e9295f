-- best_lever: the lever with the most goodput per GPU for each workload and device, with its cost and energy
--
-- Grain: one row per workload x device of one serving run.
-- Key: workload, device
-- Capacity metrics at each configuration's own capacity (offline: its saturated run). Ties on goodput go to the
-- lower $/M tok, then the lever name. Levers whose capacity is 0 are never best.
--
-- Parameters:
--   $run_id = latest     serving run to read; latest = the newest committed serving run
--
-- Columns:
--   workload               workload name
--   device                 accelerator, catalogue name
--   lever                  lever with the most goodput per GPU
--   goodput_per_gpu_per_s  req/s per GPU, good requests (both SLOs met) at capacity
--   cost_per_mtok_usd      USD per million output tokens at capacity
--   energy_per_token_j     J per output token at capacity
--   baseline_goodput_per_gpu_per_s  req/s per GPU of the baseline lever on the same workload and device
--   gain_x                 goodput / the baseline's goodput (null when the baseline's is 0)
--   levers_compared        levers with a capacity row for this workload and device

with cap as (
    select workload, device, lever, goodput_per_gpu_per_s, cost_per_mtok_usd, energy_per_token_j
    from capacity
    semi join latest_run('serving', $run_id) using (run_id)
),

ranked as (
    select *,
           row_number() over (partition by workload, device
                              order by goodput_per_gpu_per_s desc nulls last, cost_per_mtok_usd, lever) as rank,
           count(*) over (partition by workload, device) as levers_compared
    from cap
    where goodput_per_gpu_per_s > 0
),

final as (
    select r.workload, r.device, r.lever, r.goodput_per_gpu_per_s, r.cost_per_mtok_usd, r.energy_per_token_j,
           b.goodput_per_gpu_per_s as baseline_goodput_per_gpu_per_s,
           r.goodput_per_gpu_per_s / nullif(b.goodput_per_gpu_per_s, 0) as gain_x,
           r.levers_compared
    from ranked r
    left join cap b on b.workload = r.workload and b.device = r.device and b.lever = 'baseline'
    where r.rank = 1
    order by r.workload, r.device
)

select * from final
