-- break_even: the smallest batch at which speculative decoding stops paying (speed-up below 1)
--
-- Grain: one row per device x model x draft x tp x formats x context x gamma x alpha of one decode run
-- (the batch axis is folded into the columns).
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
--   alpha                  acceptance per drafted token
--   break_even_batch       smallest swept batch with speedup < 1; null if speculation pays at every batch
--   speedup_at_break_even  x, speed-up at break_even_batch (below 1), 4 decimals
--   last_paying_batch      largest swept batch below break_even_batch with speedup >= 1; null if none
--   best_speedup           x, the largest speed-up over the swept batches, 3 decimals
--   batches_swept          batches evaluated
--   max_batch_swept        the largest batch evaluated

with run as (
    select run_id
    from runs
    where kind = 'decode' and status = 'committed' and ($run_id = 'latest' or run_id = $run_id)
    order by ended_at desc
    limit 1
),

points as (
    select
        device, model, draft, tp,
        weight_format || '/' || kv_format || '/' || compute_format as formats,
        context, gamma, alpha, batch, speedup
    from decode
    semi join run using (run_id)
    where not $fits_only or fits_in_memory
),

first_loss as (
    select device, model, draft, tp, formats, context, gamma, alpha, min(batch) as break_even_batch
    from points
    where speedup < 1
    group by all
),

final as (
    select
        p.device, p.model, p.draft, p.tp, p.formats, p.context, p.gamma, p.alpha,
        f.break_even_batch,
        round(max(p.speedup::double) filter (where p.batch = f.break_even_batch), 4) as speedup_at_break_even,
        max(p.batch) filter (
            where p.speedup >= 1 and (f.break_even_batch is null or p.batch < f.break_even_batch)
        ) as last_paying_batch,
        round(max(p.speedup::double), 3) as best_speedup,
        count(*) as batches_swept,
        max(p.batch) as max_batch_swept
    from points as p
    left join first_loss as f
        using (device, model, draft, tp, formats, context, gamma, alpha)
    group by p.device, p.model, p.draft, p.tp, p.formats, p.context, p.gamma, p.alpha, f.break_even_batch
)

select * from final
order by model, draft, device, tp, formats, context, gamma, alpha
