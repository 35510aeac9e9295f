-- optimal_gamma: the draft length gamma that maximises the speed-up, and that speed-up
--
-- Grain: one row per device x model x draft x tp x formats x context x batch x alpha of one decode run
-- (the gamma axis is folded into the columns; ties go to the smaller gamma).
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
--   alpha               acceptance per drafted token
--   best_gamma          the gamma with the largest speed-up
--   best_speedup        x, speed-up at best_gamma, 3 decimals
--   ms_per_token_spec   ms per output token at best_gamma = s_per_token_spec x 1e3, 4 decimals
--   tokens_per_pass     E at best_gamma = (1 - alpha^(gamma+1)) / (1 - alpha), 3 decimals
--   verify_bound        memory | compute | power: what limits the verify pass at best_gamma
--   gammas_swept        gammas evaluated
--   speedup_worst       x, the smallest speed-up over the swept gammas, 3 decimals

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
        context, batch, alpha, gamma, speedup, s_per_token_spec, tokens_per_pass, verify_bound
    from decode
    semi join run using (run_id)
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
        partition by device, model, draft, tp, formats, context, batch, alpha
        order by speedup desc, gamma
        rows between unbounded preceding and unbounded following
    )
),

final as (
    select
        device, model, draft, tp, formats, context, batch, alpha,
        gamma as best_gamma,
        round(speedup::double, 3) as best_speedup,
        round(s_per_token_spec * 1e3, 4) as ms_per_token_spec,
        round(tokens_per_pass::double, 3) as tokens_per_pass,
        verify_bound,
        gammas_swept,
        round(speedup_worst::double, 3) as speedup_worst
    from ranked
    where rank = 1
)

select * from final
order by model, draft, device, tp, formats, context, batch, alpha
