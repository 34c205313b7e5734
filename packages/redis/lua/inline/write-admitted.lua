-- Writes the entry nv that an op closure admitted (packed) under key at now, on Redis time:
-- xn its expiry, x0 the expiry the key's TTL was set for, at whether xn is a window's end.
-- An unchanged expiry: written over the entry read with SETRANGE (see one.lua).
if xn == x0 and xn > now then
  if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
elseif at or xn <= now then write_packed(key, nv, xn, now, at)
else
  -- A bucket's expiry as a TTL (PX), ceil(xn - now) as -floor(now - xn).
  local dt = now - xn
  local ms = -(dt - dt % 1)
  call('SET', key, nv, 'PX', TTL_TEXT[ms] or ttl_text(ms))
end
