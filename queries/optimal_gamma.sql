-- optimal_gamma: the draft length gamma that maximises the speed-up, and that speed-up
--
-- Grain: one row per device x model x draft x tp x formats x context x batch x acceptance model (acceptance,
-- alpha, decay) of one decode run (the gamma axis is folded into the columns; ties go to the smaller gamma).
-- Works for every acceptance model: the speed-up of each gamma already carries its E.
--
-- Key: device, model, draft, tp, formats, context, batch, acceptance, alpha, decay
--
-- Parameters:
--   $run_id = latest    decode run to read; latest = the newest committed decode run
--   $device = null      only this device; null = all
--   $context = null     only this context (tokens cached per row); null = all
--
-- Columns:
--   device              accelerator, catalogue name
--   model               target model
--   draft               none, mtp or a draft model
--   tp                  tensor-parallel degree
--   formats             weight/kv/compute formats
--   context             tokens cached per row
--   batch               rows decoded together
--   acceptance          acceptance model: iid, decaying or a named table (iid for runs before the column)
--   alpha               alpha_1, acceptance of the first drafted token (of every one when iid)
--   decay               r of alpha_i = alpha r^(i-1); null for a named table
--   best_gamma          the gamma with the largest speed-up
--   best_speedup        x, speed-up at best_gamma, 3 decimals
--   ms_per_token_spec   ms per output token at best_gamma = s_per_token_spec x 1e3, 4 decimals
--   tokens_per_pass     E at best_gamma = 1 + sum_{k<=gamma} prod_{i<=k} alpha_i, 3 decimals
--   verify_bound        memory | compute | power: what limits the verify pass at best_gamma
--   gammas_swept        gammas evaluated
--   speedup_worst       x, the smallest speed-up over the swept gammas, 3 decimals
--   best_speedup_p10    x, p10 of the speed-up at best_gamma over the grid's [bands] draws; null without bands
--   best_speedup_p90    x, p90 of the same, 3 decimals; null without bands
--   share_spec_faster   share of the draws in which speculation at best_gamma beats plain decoding; null without bands

with points as (
    select
        device, model, draft, tp, formats,
        context, batch, acceptance, alpha, decay,
        gamma, speedup, s_per_token_spec, tokens_per_pass, verify_bound, speedup_p10, speedup_p90, share_spec_faster
    from labelled_points($run_id)
    where ($device is null or device = $device)
      and ($context is null or context = $context)
),

ranked as (
    select
        *,
        row_number() over cell as rank,
        count(*) over cell as gammas_swept,
        min(speedup) over cell as speedup_worst
    from points
    window cell as (
        partition by device, model, draft, tp, formats, context, batch, acceptance, alpha, decay
        order by speedup desc, gamma
        rows between unbounded preceding and unbounded following
    )
),

final as (
    select
        device, model, draft, tp, formats, context, batch, acceptance, alpha, decay,
        gamma as best_gamma,
        round(speedup::double, 3) as best_speedup,
        round(s_per_token_spec * 1e3, 4) as ms_per_token_spec,
        round(tokens_per_pass::double, 3) as tokens_per_pass,
        verify_bound,
        gammas_swept,
        round(speedup_worst::double, 3) as speedup_worst,
        round(speedup_p10::double, 3) as best_speedup_p10,
        round(speedup_p90::double, 3) as best_speedup_p90,
        round(share_spec_faster::double, 3) as share_spec_faster
    from ranked
    where rank = 1
)

select * from final
order by model, draft, device, tp, formats, context, batch, acceptance, alpha, decay
