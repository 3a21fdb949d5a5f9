# The developer console page (console/ as make builds it into build/console/,
# served as nginx_conf/console_page.conf
# says) in real headless Chromium: sign in with a console token (kept in
# sessionStorage only), the plan catalog with USD prices, create a key (the
# secret shown once with its warning) that works at the edge, revoke it with
# the confirmation, and the edge refuses it; the audit list shows both. The
# roll prompt rolls only on a valid answer, a grace of 0 only once confirmed.
# A sign-out or a 401 leaves no secret on the page, even for the next
# account signing in in that tab. The screenshot goes to docs/console.png
# when KEYAUTH_SCREENSHOT is set.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json);
use KeyauthTest;

my $driver = "$FindBin::Bin/lib/console_browser.py";
plan skip_all => 'chromium, chromium-driver or python3-selenium missing (make deps installs them)'
    unless -x '/usr/bin/chromium' && -x '/usr/bin/chromedriver'
        && system('/usr/bin/python3', '-c', 'import selenium') == 0;

my $root = KeyauthTest::root();
my $page = KeyauthTest::console_dir();
my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 600);
my $other = $t->account(name => 'another account', entitlement => 600);
$t->start_keyauthd;
$t->start_nginx(http => "keyauth_zone keys:1m;\n" . $t->console_http, locations => $t->console_locations . <<"LOC");
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
        location /api/plans { keyauth off; keyauth_plans; }
        location /console/ {
            alias $page/;
            include $root/nginx_conf/console_page.conf;
        }
        location = /console { keyauth off; return 301 /console/; }
LOC
$t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
$t->ctl('fx', 'set', '83.50');

subtest 'the page as nginx serves it' => sub {
    my $res = $t->request(GET => '/console/');
    is $res->{status}, 200, 'GET /console/';
    like KeyauthTest::header($res, 'Content-Security-Policy') // '', qr/default-src 'none'; script-src 'self'/,
        'a Content-Security-Policy that allows its own script only';
    is $t->request(GET => '/console')->{status}, 301, '/console redirects';
    is $t->request(POST => '/console/')->{status}, 403, 'only GET';
    is $t->request(GET => '/console/console.js')->{status}, 200, 'the script';
};

my $shot = $ENV{KEYAUTH_SCREENSHOT} // $t->dir . '/console.png';
my $base = 'http://127.0.0.1:' . $t->port;
my $out = `/usr/bin/python3 $driver $base $acc->{consoleToken} $other->{consoleToken} $shot 2>&1`;
is $? >> 8, 0, 'the browser ran the flow' or diag $out;
my ($json) = $out =~ /^(\{.*\})$/m;
my $seen = eval { decode_json($json // '') } // {};

is $seen->{plans}, 10, 'the catalog: ten plans';
my $fx = decode_json($t->request(GET => '/api/plans')->{body})->{plans}[0]{exchangeRate};
is $seen->{fx}, $fx, "with the current exchange rate ($fx)";
ok $seen->{app_hidden_before_sign_in}, 'nothing of the account before signing in';
ok $seen->{token_in_session_storage}, 'the token in sessionStorage';
ok !$seen->{token_in_local_storage}, 'nothing in localStorage';
is $seen->{cookies}, 0, 'no cookie';
is $seen->{secret_prefix}, 'ka_', 'a new secret is shown';
like $seen->{warning} // '', qr/shown once.*server-side secret store/s, 'with the warning';
is_deeply [@{ $seen->{row} // [] }[0, 3, 4]], ['from the browser', '120', 'active'], 'the key is listed';
is $seen->{row}[2], "ip:read \x{2014} from 127.0.0.0/8, 10.0.0.0/8", '... with where it may be used from (allowedIps)';
is $seen->{edge_after_create}, 200, 'the new key works at the edge';
ok $seen->{secret_gone}, 'dismissed, the secret leaves the page';
like $seen->{confirmation} // '', qr/^Revoke "from the browser"/, 'revoking asks first';
is $seen->{status_after_revoke}, 'revoked', 'the list shows it revoked';
is $seen->{edge_after_revoke}, 401, 'and the edge refuses it';
is_deeply [sort @{ $seen->{audit} // [] }[0, 1]], ['key.create', 'key.revoke'], 'the audit list shows both';
ok !$seen->{page_text_has_secret}, 'the secret is nowhere on the page afterwards';

# [box displayed, #secret's text] as "hidden:" or "shown:ka_..."
sub secret_of { my $s = shift // []; return ($s->[0] ? 'shown' : 'hidden') . ':' . ($s->[1] // 'undef') }
my %unrolled = %{ $seen->{unrolled} // {} };
is_deeply [sort keys %unrolled], [sort qw(cancel empty blank word fraction negative too_long exponent)],
    'the roll prompt answered eight ways that must not roll';
for my $case (sort keys %unrolled) {
    my $u = $unrolled{$case};
    ok $u->{keys_unchanged}, "roll prompt, $case: nothing rolled (the key list unchanged)";
    is secret_of($u->{secret}), 'hidden:', '... and no secret shown';
}
is $unrolled{cancel}{message}, '', 'Cancel says nothing';
like $unrolled{$_}{message}, qr/^Nothing rolled: no grace period/, "$_: says nothing was rolled" for qw(empty blank);
like $unrolled{$_}{message}, qr/^Nothing rolled: the grace period must be a whole number of seconds from 0 to 604800/,
    "$_: refused with a message" for qw(word fraction negative too_long exponent);
like $seen->{grace0_confirmation} // '', qr/^A grace period of 0 revokes "to roll" \(ka_\S+\x{2026}\) at once/,
    'a grace of 0 asks for a confirmation first';
ok $seen->{grace0_declined_keys_unchanged}, 'declined: nothing rolled';
is secret_of($seen->{grace0_declined_secret}), 'hidden:', '... and no secret shown';
is_deeply $seen->{grace0_confirmed}, { old_status => 'revoked', new_keys => 1, secret_prefix => 'ka_' },
    'confirmed: rolled, the old key revoked at once, the new secret shown';
my $rolled_edit = $seen->{rolled_edit} // {};
ok !$rolled_edit->{expires_enabled} && !$rolled_edit->{never_enabled} && exists $rolled_edit->{expires_enabled},
    'Edit on a rolled key in its grace offers no expiry (it would revive the key)';
like $rolled_edit->{note} // '', qr/rolled: it stops when its grace ends/, '... and says why';

is $seen->{token_after_sign_out}, undef, 'signing out forgets the token';
is secret_of($seen->{secret_after_sign_out}), 'hidden:', '... and the secret on screen: hidden and emptied';
is $seen->{key_rows_after_sign_out}, 0, '... and the key list';
is secret_of($seen->{secret_after_sign_in_again}), 'hidden:', 'signing in again in that tab shows no secret';
my $after_401 = $seen->{after_401} // {};
is secret_of($after_401->{secret}), 'hidden:', 'a 401 (the token no longer valid) hides and empties the secret';
ok !$after_401->{app_displayed}, '... signs out: no account view';
is $after_401->{token}, undef, '... forgets the token';
like $after_401->{message} // '', qr/^INVALID_CONSOLE_TOKEN: /, '... and says why';
my $second = $seen->{other_account} // {};
is secret_of($second->{secret}), 'hidden:', 'another account signing in in that tab sees no secret';
ok exists $second->{sees_a_secret} && !$second->{sees_a_secret}, '... none of the first account\'s secrets anywhere';
is $second->{key_rows}, 0, '... and no key of the first account';
is_deeply $seen->{console_errors} // [], [], 'no error in the browser console (CSP included)';
ok -s $shot, "a screenshot: $shot";

done_testing;
