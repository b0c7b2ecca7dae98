// The targets of the url-check tests (test/proxies/check.test.ts): the names BROWSERD_TEST_HOOKS
// resolve= gives public-looking addresses (so no byte leaves loopback), and every URL the SSRF guard
// must refuse with 400 before any connection.

export const PUBLIC_V4 = '93.184.216.34';
export const PUBLIC_V6 = '2606:4700::1';
export const RESOLVE = [
  `test.example:${PUBLIC_V4}`,
  `other.example:${PUBLIC_V4}`,
  `v6.example:${PUBLIC_V6}`,
  `mixed.example:${PUBLIC_V4}/10.0.0.1`,
  'private.example:192.168.1.10',
  'mapped.example:::ffff:127.0.0.1',
  'metadata.example:169.254.169.254',
  'nat64.example:64:ff9b::a00:1',
  // IPv4-compatible IPv6, as a resolver may print it: compressed, or with a dotted tail (which
  // ipaddr.js alone would read as IPv4-mapped, i.e. as the public 8.8.8.8).
  'compat.example:::7f00:1',
  'compat4.example:::8.8.8.8',
  'compat-public.example:::808:808',
].join(';');

export const REFUSED = [
  'ftp://test.example/',
  'file:///etc/passwd',
  'javascript:alert(1)',
  'not a url',
  'http://user:pw@test.example/',
  'http://127.0.0.1/',
  'http://localhost/',
  'http://2130706433/',
  'http://0x7f.1/',
  'http://0177.0.0.1/',
  'http://127.1/',
  'http://[::1]/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:7f00:1]/',
  'http://10.0.0.1/',
  'http://172.16.0.1/',
  'http://192.168.0.1/',
  'http://169.254.169.254/latest/meta-data/',
  'http://100.64.0.1/',
  'http://0.0.0.0/',
  'http://[::]/',
  'http://[fe80::1]/',
  'http://[fc00::1]/',
  'http://[2002:7f00:1::]/',
  'http://[64:ff9b::7f00:1]/',
  'http://[2001::1]/',
  'http://224.0.0.1/',
  'http://255.255.255.255/',
  'http://192.0.2.1/',
  // Port 0: no server listens there (the URL parser accepts it).
  `http://${PUBLIC_V4}:0/`,
  'https://test.example:0/',
  // IPv4-compatible IPv6 (::/96, RFC 4291 §2.5.5.1), which ipaddr.js calls unicast; the URL parser
  // writes [::127.0.0.1] as [::7f00:1].
  'http://[::127.0.0.1]/',
  'http://[::a00:1]/',
  'http://[::808:808]/',
  // Outside the global unicast block 2000::/3 but unicast to ipaddr.js: the rest of ::/8, fe00::/9, unallocated space.
  'http://[::1:0:0:0]/',
  'http://[fe00::1]/',
  'http://[4000::1]/',
  // Classed by ipaddr.js itself; here so that an ipaddr.js that stops doing so fails this test.
  'http://[64:ff9b:1::a00:1]/', // local-use NAT64, RFC 8215
  'http://[100::1]/', // discard-only, RFC 6666
  'http://[2001:1::1]/', // IETF protocol assignments 2001::/23, RFC 2928
  'http://[2001:10::1]/', // ORCHID, RFC 4843
  'http://[2001:20::1]/', // ORCHIDv2, RFC 7343
  'http://[2001:db8::1]/', // documentation, RFC 3849
  'http://[fd00::1]/', // unique local fc00::/7, RFC 4193
  'http://[fec0::1]/', // site-local, RFC 3879
  'http://[febf::1]/', // link-local fe80::/10, RFC 4291
  'http://0.1.2.3/', // "this network" 0.0.0.0/8, RFC 1122
  'http://192.0.0.9/', // IETF protocol assignments, RFC 6890
  'http://198.19.0.1/', // benchmarking 198.18.0.0/15, RFC 2544
  'http://198.51.100.1/', // TEST-NET-2, RFC 5737
  'http://203.0.113.1/', // TEST-NET-3, RFC 5737
  'http://240.0.0.1/', // reserved 240.0.0.0/4, RFC 1112
  // localhost names are loopback by definition (RFC 6761), refused without a lookup.
  'http://localhost./',
  'http://api.localhost/',
  'http://private.example/',
  'http://mixed.example/',
  'http://mapped.example/',
  'http://metadata.example/',
  'http://nat64.example/',
  'http://compat.example/',
  'http://compat4.example/',
  'http://compat-public.example/',
  // Through the DNS server: one address of the name is not public.
  'http://private-dns.example/',
  'http://v6private-dns.example/',
  'http://compat-dns.example/',
];
