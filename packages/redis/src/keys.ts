/**
 * Redis key layout and Cluster slots.
 *
 * A key is `<prefix><rule id>{<tag>}` by default, where the hash tag is the sanitised
 * key itself: the rules of a stack that count under the same key (an IP, a user) share a
 * slot, while different clients spread over the cluster. With `hashTag(rule, key)` (given
 * the key before sanitising) the layout is `<prefix><rule id>{<tag>}<key>`, so a tenant's
 * whole stack can share a slot. The rule id holds the rule's kind (algorithm and window,
 * `<limiter prefix>:<group or name>:<kind>`). Rule ids, sanitised keys and tags never
 * contain braces, so the first `{` ends the rule id and no two (rule, key) pairs map to
 * one Redis key.
 */

export function redisKey(prefix: string, ruleId: string, key: string, tag: string | undefined): string {
  return tag === undefined ? `${prefix}${ruleId}{${key}}` : `${prefix}${ruleId}{${tag}}${key}`;
}

// CRC16/XMODEM, the checksum Redis Cluster uses: slot = crc16(tag) mod 16384.
const TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let c = i << 8;
  for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
  TABLE[i] = c;
}

/** The Redis Cluster slot of `key` (hash tags honoured, as Redis defines them). */
export function slotOf(key: string): number {
  const bytes = Buffer.from(key);
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  return crc & 0x3fff;
}
