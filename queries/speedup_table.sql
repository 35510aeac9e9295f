-- speedup_table: plain against speculative decoding, time per output token (the seed chapter's decode table)
--
-- Grain: one row per device x model x draft x tp x formats x context x batch x gamma x alpha of one decode
-- run (every grid point of the run, filtered by the parameters).
--
-- Key: device, model, draft, tp, formats, context, batch, gamma, alpha, acceptance, decay
--
-- Parameters:
--   $run_id = latest    decode run to read; latest = the newest committed decode run
--   $device = null          only this device; null = all
--   $context = null         only this context (tokens cached per row); null = all
--   $model = null           only this target model; null = all
--   $draft = null           only this draft; null = all
--   $tp = null              only this tensor-parallel degree; null = all
--   $weight_format = null   only this weight format; null = all
--   $kv_format = null       only this KV-cache format; null = all
--   $compute_format = null  only this compute format; null = all
--
-- Columns:
--   device              accelerator, catalogue name
--   model               target model, catalogue name
--   draft               none, mtp or a draft model
--   tp                  tensor-parallel degree
--   formats             weight/kv/compute formats, e.g. bf16/bf16/bf16
--   context             tokens cached per row
--   batch               rows decoded together
--   gamma               draft tokens per verify pass
--   alpha               acceptance per drafted token (alpha_1 of a per-position model)
--   acceptance          acceptance model: iid, decaying (alpha_i = alpha decay^(i-1)) or a named table
--   decay               r of a decaying model (1 = iid); null for a named table
--   ms_per_token_plain  ms per output token, plain = s_per_token_plain x 1e3, 3 decimals
--   ms_per_token_spec   ms per output token, speculative = s_per_token_spec x 1e3, 3 decimals
--   verify_bound        memory | compute | power: what limits the verify pass
--   speedup             x, ms_per_token_plain / ms_per_token_spec (unrounded times), 2 decimals
--   fits_in_memory      the point's weights and KV fit in HBM

with points as (
    select d.*
    from decode_points($run_id) as d
    where ($device is null or d.device = $device)
      and ($context is null or d.context = $context)
      and ($model is null or d.model = $model)
      and ($draft is null or d.draft = $draft)
      and ($tp is null or d.tp = $tp)
      and ($weight_format is null or d.weight_format = $weight_format)
      and ($kv_format is null or d.kv_format = $kv_format)
      and ($compute_format is null or d.compute_format = $compute_format)
),

final as (
    select
        device,
        model,
        draft,
        tp,
        formats_label(weight_format, kv_format, compute_format) as formats,
        context,
        batch,
        gamma,
        alpha,
        acceptance_label(acceptance) as acceptance,
        decay_value(acceptance, decay) as decay,
        round(s_per_token_plain * 1e3, 3) as ms_per_token_plain,
        round(s_per_token_spec * 1e3, 3) as ms_per_token_spec,
        verify_bound,
        round(speedup::double, 2) as speedup,
        fits_in_memory
    from points
)

select * from final
order by model, draft, device, tp, formats, context, batch, gamma, alpha, acceptance, decay
