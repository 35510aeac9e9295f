-- bounds: where each roofline regime holds (memory, power or compute bound), with the batch and context ranges
--
-- Grain: one row per device x model x draft x bound of one decode run, for the chosen pass.
--
-- Key: device, model, draft, bound
--
-- Parameters:
--   $run_id = latest    decode run to read; latest = the newest committed decode run
--   $pass = verify      which pass's bound: verify (the speculative step's target pass) or plain
--
-- Columns:
--   device              accelerator, catalogue name
--   model               target model
--   draft               none, mtp or a draft model
--   bound               memory | power | compute
--   n_points            grid points in this regime
--   share_pct           %, n_points over the device x model x draft's points, 1 decimal
--   batch_min           smallest batch in this regime
--   batch_max           largest batch in this regime
--   context_min         smallest context (tokens per row) in this regime
--   context_max         largest context in this regime
--   tokens_min          smallest total cached context B x S, tokens
--   tokens_max          largest total cached context B x S, tokens

with points as (
    select
        device, model, draft,
        case when $pass = 'plain' then plain_bound else verify_bound end as bound,
        batch, context
    from decode_points($run_id)
),

regimes as (
    select
        device, model, draft, bound,
        count(*) as n_points,
        min(batch) as batch_min,
        max(batch) as batch_max,
        min(context) as context_min,
        max(context) as context_max,
        min(batch * context) as tokens_min,
        max(batch * context) as tokens_max
    from points
    group by all
),

final as (
    select
        device, model, draft, bound, n_points,
        round(100.0 * n_points / sum(n_points) over (partition by device, model, draft), 1) as share_pct,
        batch_min, batch_max, context_min, context_max, tokens_min, tokens_max
    from regimes
)

select * from final
order by model, draft, device, case bound when 'memory' then 0 when 'power' then 1 else 2 end
