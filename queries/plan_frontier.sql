-- plan_frontier: the deployments of one plan run on its Pareto frontier, best objective first per workload
--
-- Grain: one row per workload x frontier configuration of one plan run (sweepkit plan).
-- Key: workload, rank
-- The frontier is of (objective, TTFT p99, TPOT p99) at capacity over the run's simulated configurations; the
-- screen's bound is the objective's analytic upper bound, bound_share how close the simulation came to it.
--
-- Parameters:
--   $run_id = latest     plan run to read; latest = the newest committed plan run
--
-- Columns:
--   workload               workload name
--   rank                   1 = the highest objective on the workload's frontier
--   device                 accelerator, catalogue name
--   gpus                   GPUs of the deployment
--   layout                 e.g. 2 x tp4 (colocated), 1 x tp4 prefill + 1 x tp4 decode (disaggregated), 2 x tp1 dp8 ep8
--                          (attention data parallelism over 8 ranks, experts over 8)
--   batching               prefill-priority | decode-priority | chunked
--   kv                     KV memory: reserved, paged, or paged+prefix (paged with prefix caching)
--   formats                weight/KV formats
--   spec                   speculation: none, or DRAFT:GAMMA (e.g. mtp:3)
--   objective_name         tokens_per_gpu | tokens_per_usd
--   objective              output tokens/s per GPU, or output tokens per USD, at capacity
--   bound_share            objective / the screen's bound, 0..1
--   ttft_p99_s             s, 99th percentile TTFT at capacity
--   tpot_p99_s             s, 99th percentile TPOT at capacity
--   cost_per_mtok_usd      USD per million output tokens at capacity (illustrative prices)
--   energy_per_token_j     J per output token at capacity
--   contributions          JSON: lever axis -> bound ratio against that axis at the baseline value
--   lever_toml             the configuration as a [levers.<name>] table for sweepkit simulate

with frontier as (
    select *
    from plan
    semi join latest_run('plan', $run_id) using (run_id)
    where frontier
),

experts as (
    select
        *,
        case when dp > 1 then ' dp' || dp else '' end || case when ep > 1 then ' ep' || ep else '' end as experts
    from frontier
),

final as (
    select
        workload,
        row_number() over (partition by workload order by objective desc, ttft_p99_s) as rank,
        device,
        gpus,
        case when mode = 'disagg'
             then prefill_instances || ' x tp' || prefill_tp || ' prefill + ' || instances || ' x tp' || tp || experts
                  || ' decode'
             else instances || ' x tp' || tp || case when pp > 1 then ' pp' || pp else '' end || experts
        end as layout,
        batching,
        kv,
        weight_format || '/' || kv_format as formats,
        spec,
        objective_name,
        round(objective, 1) as objective,
        round(objective / nullif(bound, 0), 3) as bound_share,
        ttft_p99_s,
        tpot_p99_s,
        cost_per_mtok_usd,
        energy_per_token_j,
        contributions,
        lever_toml
    from experts
    order by workload, rank
)

select * from final
