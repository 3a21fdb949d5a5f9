# Issue 47 item 1, on one host: a deployment's own key prefix. The prefix is
# changed twice (keyauthctl config set key-prefix); keys of all three
# prefixes answer 200 at the edge; new keys, from the console API and from
# keyauthctl, take the newest; a typo in a custom-prefix key is 401
# INVALID_API_KEY, and so is a well-formed key of a prefix this deployment
# never had; the key regular expression `config show` prints matches every
# key made and no console or admin token; a bad name exits 2 and changes
# nothing; the audit trail shows each change.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Compress::Zlib ();
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account;
my $ka = $t->key(account => $acc->{id});
like $ka->{secret}, qr/^ka_[0-9A-Za-z]{38}$/, 'until a prefix is set, keys are ka_';

$t->start_console_stack(locations => 'location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }');
my $console = $t->console_client($acc->{consoleToken});

sub console_key {
    my $res = $console->(POST => '/v1/keys', { name => 'from the console', scopes => ['ip:read'], rateLimitPerMinute => 600 });
    is $res->{status}, 201, 'the console API makes a key' or diag $res->{body};
    return $res->{json};
}

my $show = $t->ctl('config', 'show');
is $show->{keyPrefix}, 'ka', 'config show: ka by default';
is_deeply $show->{earlierKeyPrefixes}, [], '... and no earlier one';

my %made = (ka => [$ka->{secret}, console_key()->{secret}]);
for my $name (qw(acme z9)) {
    my $set = $t->ctl('config', 'set', 'key-prefix', $name);
    is $set->{keyPrefix}, $name, "config set key-prefix $name";
    my $cli = $t->key(account => $acc->{id});
    my $web = console_key();
    like $cli->{secret}, qr/^\Q$name\E_[0-9A-Za-z]{38}$/, "keyauthctl's new key is $name\_...";
    like $web->{secret}, qr/^\Q$name\E_[0-9A-Za-z]{38}$/, "the console's new key is $name\_...";
    is $web->{prefix}, substr($web->{secret}, 0, 12), '... its prefix its first 12 characters';
    $made{$name} = [$cli->{secret}, $web->{secret}];
}
is_deeply $t->ctl('config', 'show')->{earlierKeyPrefixes}, [qw(acme ka)], 'both earlier prefixes are kept, newest first';
my @keys = map { @{ $made{$_} } } sort keys %made;

sub status_of { $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $_[0]") }
for my $secret (@keys) {
    is status_of($secret)->{status}, 200, 'at the edge: ' . substr($secret, 0, 12) . '... answers 200';
}

sub refused_as_invalid {
    my ($res, $what) = @_;
    is $res->{status}, 401, "$what: 401";
    is((KeyauthTest::json_body($res) // {})->{error}{code}, 'INVALID_API_KEY', "$what: INVALID_API_KEY");
}
my $typo = $made{acme}[0];
substr($typo, 10, 1) = substr($typo, 10, 1) eq 'A' ? 'B' : 'A';
refused_as_invalid(status_of($typo), 'a typo in an acme_ key');
like $t->error_log, qr/API key of 43 bytes is not a well-formed keyauth key/, '... refused by its checksum, before any lookup';

# A key with a valid checksum under a prefix this deployment never had (as
# another deployment makes them): looked up, not found.
sub foreign_key {
    my ($name) = @_;
    my @alphabet = ('0' .. '9', 'A' .. 'Z', 'a' .. 'z');
    my $s = "${name}_" . join '', map { $alphabet[int rand 62] } 1 .. 32;
    my $crc = Compress::Zlib::crc32($s);
    my $sum = '';
    for (1 .. 6) { $sum = $alphabet[$crc % 62] . $sum; $crc = int($crc / 62) }
    return $s . $sum;
}
refused_as_invalid(status_of(foreign_key('other')), 'a well-formed key of a prefix never set here');
like $t->error_log, qr/API key "other_\S{6}\.\.\." is unknown/, '... looked up and not found';
refused_as_invalid(status_of($acc->{consoleToken}), 'a console token as a key');

# The key expression, parsed out of config show's text, as an operator
# copies it into a secret scanner.
my ($rc, $text) = $t->ctl_text('config', 'show');
is $rc, 0, 'config show (text)';
like $text, qr/^key prefix: z9$/m, '... names the current prefix';
like $text, qr/^earlier key prefixes: acme, ka$/m, '... and the earlier ones';
my ($key_re) = $text =~ /^\s+keys\s+(\S+)$/m;
my ($admin_re) = $text =~ /^\s+admin tokens\s+(\S+)$/m;
my ($console_re) = $text =~ /^\s+console tokens\s+(\S+)$/m;
is $key_re, '\b(?:z9|acme|ka)_[0-9A-Za-z]{38}\b', 'the key expression';
is $admin_re, '\bkaa_[0-9A-Za-z]{38}\b', 'the admin token expression';
is $console_re, '\bkac_[0-9A-Za-z]{38}\b', 'the console token expression';
my $admin = $t->ctl('admin-token', 'create', '--name', 'ops', '--scope', 'accounts:read');
my @tokens = ($acc->{consoleToken}, $t->ctl('account', 'rotate-token', $acc->{id})->{consoleToken});
for my $secret (@keys) {
    ok "token = '$secret';" =~ /$key_re/ && $& eq $secret, 'the key expression matches ' . substr($secret, 0, 12) . '...';
    ok $secret !~ /$admin_re/ && $secret !~ /$console_re/, '... and neither token expression does';
}
for my $token (@tokens) {
    ok $token =~ /$console_re/, 'the console token expression matches a console token';
    ok $token !~ /$key_re/ && $token !~ /$admin_re/, '... and the key and admin expressions do not';
}
ok $admin->{token} =~ /$admin_re/, 'the admin token expression matches an admin token';
ok $admin->{token} !~ /$key_re/ && $admin->{token} !~ /$console_re/, '... and the key and console expressions do not';

# A bad name: exit 2, a clear message, nothing changed.
my $events = sub { scalar grep { $_->{action} eq 'config.set_key_prefix' } @{ $t->ctl('audit', 'list')->{events} } };
is $events->(), 2, 'the audit trail has the two changes';
for my $bad ('Acme', 'a', 'abcdefghijk', 'kac', 'kaa', 'ac_me', 'ac-me') {
    my ($rc, $out, $err) = $t->ctl_text('config', 'set', 'key-prefix', $bad);
    is $rc, 2, "config set key-prefix $bad: exit 2";
    like $err, qr/2 to 10 lowercase letters or digits/, '... saying what a prefix is';
    is $out, '', '... printing nothing';
}
($rc, undef, my $err) = $t->ctl_text('config', 'set', 'key-suffix', 'acme');
is $rc, 2, 'an unknown setting: exit 2';
like $err, qr/config set knows one setting, key-prefix/, '... naming the one there is';
is $t->ctl('config', 'show')->{keyPrefix}, 'z9', 'nothing changed the prefix';
like $t->key(account => $acc->{id})->{secret}, qr/^z9_/, 'new keys still take z9';
is $events->(), 2, 'and nothing reached the audit trail';
$t->ctl('config', 'set', 'key-prefix', 'z9');
is $events->(), 2, 'setting the current prefix again is no change';

my @changes = grep { $_->{action} eq 'config.set_key_prefix' } @{ $t->ctl('audit', 'list')->{events} };
is_deeply [map { $_->{changes}{keyPrefix} } @changes], [{ from => 'acme', to => 'z9' }, { from => 'ka', to => 'acme' }],
    'each change in the audit trail: from, to';
is $changes[0]{actor}{type}, 'operator', '... by the operator';
is_deeply [grep { $_->{action} eq 'config.set_key_prefix' } @{ $t->ctl('audit', 'list', '--account', $acc->{id})->{events} }],
    [], '... in the operator\'s own trail, not an account\'s';

done_testing;
