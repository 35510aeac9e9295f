-- report_plan: every simulated configuration of the latest plan run, for the report's frontier chart
--
-- Grain: one row per workload x simulated configuration of one plan run (sweepkit plan).
-- Key: workload, configuration
--
-- Parameters:
--   $run_id = latest     plan run to read; latest = the newest committed plan run
--
-- Columns:
--   workload               workload name
--   configuration          device, layout (with dpN epM for expert layouts), batching, KV, formats and speculation in
--                          one label
--   device                 accelerator, catalogue name
--   frontier               on the Pareto frontier of (objective, TTFT p99, TPOT p99)
--   objective_name         tokens_per_gpu | tokens_per_usd
--   objective              output tokens/s per GPU, or output tokens per USD, at capacity
--   bound                  the screen's upper bound of the objective
--   ttft_p99_s             s, 99th percentile TTFT at capacity
--   tpot_p99_s             s, 99th percentile TPOT at capacity
--   cost_per_mtok_usd      USD per million output tokens at capacity (illustrative prices)
--   energy_per_token_j     J per output token at capacity
--   lever_toml             the configuration as a [levers.<name>] table for sweepkit simulate

with simulated as (
    select
        *,
        case when dp > 1 then 'dp' || dp else '' end || case when ep > 1 then 'ep' || ep else '' end as experts
    from plan
    semi join latest_run('plan', $run_id) using (run_id)
),

final as (
    select
        workload,
        device || ' ' || gpus || ' GPUs: '
            || case when mode = 'disagg'
                    then prefill_instances || 'xtp' || prefill_tp || ' P + ' || instances || 'xtp' || tp || experts
                         || ' D'
                    else instances || 'xtp' || tp || case when pp > 1 then 'pp' || pp else '' end || experts
               end
            || ', ' || batching || ' ' || token_budget || ', cap ' || batch_cap || ', ' || kv || ', '
            || weight_format || '/' || kv_format || ', ' || spec as configuration,
        device,
        frontier,
        objective_name,
        objective,
        bound,
        ttft_p99_s,
        tpot_p99_s,
        cost_per_mtok_usd,
        energy_per_token_j,
        lever_toml
    from simulated
    where objective > 0
    order by workload, objective desc
)

select * from final
