-- break_even: the smallest batch at which speculative decoding stops paying (speed-up below 1)
--
-- Grain: one row per device x model x draft x tp x formats x context x gamma x acceptance model (acceptance,
-- alpha, decay) of one decode run (the batch axis is folded into the columns). Works for every acceptance
-- model: each point's speed-up already carries its E.
--
-- Key: device, model, draft, tp, formats, context, gamma, acceptance, alpha, decay
--
-- Parameters:
--   $run_id = latest     decode run to read; latest = the newest committed decode run
--   $fits_only = false   true: only grid points whose weights and KV fit in HBM
--
-- Columns:
--   device                 accelerator, catalogue name
--   model                  target model
--   draft                  none, mtp or a draft model
--   tp                     tensor-parallel degree
--   formats                weight/kv/compute formats
--   context                tokens cached per row
--   gamma                  draft tokens per verify pass
--   acceptance             acceptance model: iid, decaying or a named table (iid for runs before the column)
--   alpha                  alpha_1, acceptance of the first drafted token (of every one when iid)
--   decay                  r of alpha_i = alpha r^(i-1); null for a named table
--   break_even_batch       smallest swept batch with speedup < 1; null if speculation pays at every batch
--   speedup_at_break_even  x, speed-up at break_even_batch (below 1), 4 decimals
--   last_paying_batch      largest swept batch below break_even_batch with speedup >= 1; null if none
--   best_speedup           x, the largest speed-up over the swept batches, 3 decimals
--   batches_swept          batches evaluated
--   max_batch_swept        the largest batch evaluated
--   break_even_batch_p10   smallest swept batch whose [bands] p10 speed-up is below 1 (10% of draws lose); null: none
--   break_even_batch_p90   smallest swept batch whose [bands] p90 speed-up is below 1 (90% of draws lose); null: none

with points as (
    select
        device, model, draft, tp, formats,
        context, gamma, acceptance, alpha, decay,
        batch, speedup, speedup_p10, speedup_p90
    from labelled_points($run_id)
    where not $fits_only or fits_in_memory
),

cells as (
    select
        *,
        min(case when speedup < 1 then batch end) over cell as break_even_batch,
        min(case when speedup_p10 < 1 then batch end) over cell as break_even_batch_p10,
        min(case when speedup_p90 < 1 then batch end) over cell as break_even_batch_p90
    from points
    window cell as (partition by device, model, draft, tp, formats, context, gamma, acceptance, alpha, decay)
),

final as (
    select
        device, model, draft, tp, formats, context, gamma, acceptance, alpha, decay,
        any_value(break_even_batch) as break_even_batch,
        round(max(speedup::double) filter (where batch = break_even_batch), 4) as speedup_at_break_even,
        max(batch) filter (
            where speedup >= 1 and (break_even_batch is null or batch < break_even_batch)
        ) as last_paying_batch,
        round(max(speedup::double), 3) as best_speedup,
        count(*) as batches_swept,
        max(batch) as max_batch_swept,
        any_value(break_even_batch_p10) as break_even_batch_p10,
        any_value(break_even_batch_p90) as break_even_batch_p90
    from cells
    group by device, model, draft, tp, formats, context, gamma, acceptance, alpha, decay
)

select * from final
order by model, draft, device, tp, formats, context, gamma, acceptance, alpha, decay
