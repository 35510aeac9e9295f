-- trace_summary: the mechanism trace in numbers, plain against speculative decoding (sweepkit trace)
--
-- Grain: one row per mode (plain, speculative) of one trace run.
--
-- Key: mode
--
-- Parameters:
--   $run_id = latest    trace run to read; latest = the newest committed trace run
--
-- Columns:
--   mode                  plain | speculative
--   device                accelerator, catalogue name
--   model                 target model
--   draft                 none | mtp | a draft model
--   gamma                 drafted tokens per verify pass
--   alpha                 acceptance per drafted token (assumed)
--   requests              requests traced
--   decode_passes         decode (or draft + verify) steps
--   tokens_per_pass       tokens emitted per row per decode step (after the output cap), 3 decimals
--   tokens_per_pass_expected  closed form (1 - alpha^(gamma+1)) / (1 - alpha); 1 in plain mode, 3 decimals
--   acceptance_rate       accepted / drafted tokens (null in plain mode), 3 decimals
--   step_ms               ms, mean decode step (draft passes + verify pass), 3 decimals
--   ttft_p99_ms           ms, 99th percentile of first-token time - arrival, 2 decimals
--   tpot_p99_ms           ms, 99th percentile of (last token - first token) / (output - 1), 2 decimals
--   makespan_ms           ms, last step end - first arrival, 2 decimals
--   energy_per_token_j    J per output token over all steps, 4 decimals

with steps as (
    from trace_run_steps($run_id)
),

per_request as (
    select
        mode,
        request,
        any_value(arrival_s) as arrival_s,
        any_value(output_tokens) as output_tokens,
        max(end_s) filter (where pass_kind = 'prefill') as first_token_s,
        max(end_s) as last_token_s
    from steps
    group by mode, request
),

latency as (
    select
        mode,
        count(*) as requests,
        quantile_cont(first_token_s - arrival_s, 0.99) as ttft_p99_s,
        quantile_cont((last_token_s - first_token_s) / (output_tokens - 1), 0.99)
            filter (where output_tokens > 1) as tpot_p99_s,
        max(last_token_s) - min(arrival_s) as makespan_s
    from per_request
    group by mode
),

per_step as (
    select mode, pass_index, any_value(pass_kind) as pass_kind, any_value(end_s - start_s) as step_s,
           any_value(pass_energy_j) as energy_j
    from steps
    group by mode, pass_index
),

steps_agg as (
    select
        mode,
        count(*) filter (where pass_kind = 'decode') as decode_passes,
        avg(step_s) filter (where pass_kind = 'decode') as step_s,
        sum(energy_j) as energy_j
    from per_step
    group by mode
),

tokens as (
    select
        mode,
        any_value(device) as device,
        any_value(model) as model,
        any_value(draft) as draft,
        any_value(gamma) as gamma,
        any_value(alpha) as alpha,
        avg(emitted_tokens) filter (where pass_kind = 'decode') as tokens_per_pass,
        sum(accepted_tokens) filter (where pass_kind = 'decode')
            / nullif(sum(drafted_tokens) filter (where pass_kind = 'decode'), 0) as acceptance_rate,
        sum(emitted_tokens) as output_tokens
    from steps
    group by mode
),

final as (
    select
        t.mode,
        t.device,
        t.model,
        t.draft,
        t.gamma,
        t.alpha,
        l.requests,
        s.decode_passes,
        round(t.tokens_per_pass, 3) as tokens_per_pass,
        round(case when t.gamma = 0 then 1.0
                   when t.alpha = 1 then t.gamma + 1.0
                   else (1 - pow(t.alpha, t.gamma + 1)) / (1 - t.alpha) end, 3) as tokens_per_pass_expected,
        round(t.acceptance_rate, 3) as acceptance_rate,
        round(s.step_s * 1e3, 3) as step_ms,
        round(l.ttft_p99_s * 1e3, 2) as ttft_p99_ms,
        round(l.tpot_p99_s * 1e3, 2) as tpot_p99_ms,
        round(l.makespan_s * 1e3, 2) as makespan_ms,
        round(s.energy_j / t.output_tokens, 4) as energy_per_token_j
    from tokens as t
    join latency as l using (mode)
    join steps_agg as s using (mode)
)

select * from final
order by mode
