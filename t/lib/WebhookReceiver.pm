# A real HTTPS webhook receiver for the end-to-end tests (issue 46), on a
# free loopback port, with a test CA made here by the openssl command (its
# certificate names 127.0.0.1, ::1 and localhost). Every request it gets is
# logged whole (path, headers, body); how it answers depends on the path:
#   /ok        200
#   /failN     500 to the first N requests on that path, then 200
#   /gone      410
#   /hang      reads the request and never answers (held 60 s)
#   /slowN     answers 200 after N seconds
#   /redirect  302 to https://127.0.0.1:<port>/target (nothing must follow)
# verify() is the Standard Webhooks verification written here from the
# specification's text, independently of keyauthd's signing code: the
# secret is "whsec_" + base64, the signed content "id.timestamp.body", the
# signature HMAC-SHA256 in base64 after "v1,", and the timestamp within a
# tolerance of now.
package WebhookReceiver;
use strict;
use warnings;
use IO::Socket::SSL;
use IO::Socket::IP;
use JSON::PP;
use MIME::Base64 qw(decode_base64 encode_base64);
use Digest::SHA qw(hmac_sha256);
use Fcntl qw(:flock);
use POSIX ();
use KeyauthTest qw(wait_until);

my $codec = JSON::PP->new->utf8->canonical;

sub new {
    my ($class, %o) = @_;
    my $dir = $o{dir} // die 'dir';
    mkdir $dir;
    my $self = bless { dir => $dir, log => "$dir/requests.jsonl", host => $o{host} // '127.0.0.1' }, $class;
    $self->_make_certificates;
    open my $fh, '>', $self->{log} or die $!;
    close $fh;
    $self->{port} = KeyauthTest::free_port();
    $self->_start;
    return $self;
}

sub port { $_[0]{port} }
sub ca_file { "$_[0]{dir}/ca.pem" }
sub url { my ($self, $path, $host) = @_; 'https://' . ($host // $self->{host}) . ":$self->{port}$path" }

sub _run {
    my @cmd = @_;
    system(@cmd) == 0 or die "@cmd: $?";
}

sub _make_certificates {
    my $self = shift;
    my $d = $self->{dir};
    open my $ext, '>', "$d/server.ext" or die $!;
    print $ext "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\n";
    close $ext;
    my @quiet = ('2>/dev/null');
    _run("openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj '/CN=keyauth test CA' "
       . "-keyout $d/ca.key -out $d/ca.pem @quiet");
    _run("openssl req -newkey rsa:2048 -nodes -subj '/CN=localhost' -keyout $d/server.key -out $d/server.csr @quiet");
    _run("openssl x509 -req -in $d/server.csr -CA $d/ca.pem -CAkey $d/ca.key -CAcreateserial -days 3650 "
       . "-extfile $d/server.ext -out $d/server.pem @quiet");
}

sub _start {
    my $self = shift;
    my $listener = IO::Socket::IP->new(LocalHost => $self->{host}, LocalPort => $self->{port}, Listen => 64,
                                       ReuseAddr => 1) or die "listen $self->{host}:$self->{port}: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $SIG{CHLD} = 'IGNORE';
        while (1) {
            my $conn = $listener->accept or next;
            my $child = fork;
            if (defined $child && $child == 0) {
                $self->_serve($conn);
                POSIX::_exit(0);
            }
            close $conn;
        }
    }
    close $listener;
    $self->{pid} = $pid;
}

sub _serve {
    my ($self, $conn) = @_;
    alarm 70;
    IO::Socket::SSL->start_SSL($conn, SSL_server => 1, SSL_cert_file => "$self->{dir}/server.pem",
                               SSL_key_file => "$self->{dir}/server.key", Timeout => 10) or return;
    my $head = '';
    while ($head !~ /\r\n\r\n/) {
        my $n = sysread($conn, my $buf, 16384);
        return unless $n;
        $head .= $buf;
    }
    my ($h, $body) = split /\r\n\r\n/, $head, 2;
    my ($request_line, @lines) = split /\r\n/, $h;
    my ($method, $path) = split / /, $request_line;
    my %headers;
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        $headers{lc $k} = $v;
    }
    my $want = $headers{'content-length'} // 0;
    while (length $body < $want) {
        my $n = sysread($conn, my $buf, $want - length $body);
        last unless $n;
        $body .= $buf;
    }
    my $seen = $self->_log({ method => $method, path => $path, headers => \%headers, body => $body, at => time });
    my ($status, @extra) = (200);
    if ($path =~ m{^/fail(\d+)}) { $status = $seen <= $1 ? 500 : 200 }
    elsif ($path eq '/gone') { $status = 410 }
    elsif ($path eq '/hang') { sleep 60; return }
    elsif ($path =~ m{^/slow(\d+)}) { sleep $1 }
    elsif ($path eq '/redirect') { $status = 302; push @extra, "Location: https://127.0.0.1:$self->{port}/target" }
    my $text = "{}";
    print $conn "HTTP/1.1 $status X\r\nContent-Type: application/json\r\nContent-Length: " . length($text)
        . "\r\nConnection: close\r\n" . join('', map {"$_\r\n"} @extra) . "\r\n$text";
    $conn->close(SSL_fast_shutdown => 1);
}

# Appends the request; returns how many requests that path has had, this one included.
sub _log {
    my ($self, $entry) = @_;
    open my $fh, '+<', $self->{log} or die $!;
    flock $fh, LOCK_EX;
    my $count = 1;
    while (my $line = <$fh>) {
        my $e = eval { $codec->decode($line) } or next;
        $count++ if $e->{path} eq $entry->{path};
    }
    seek $fh, 0, 2;
    print $fh $codec->encode($entry), "\n";
    close $fh;
    return $count;
}

# Every request received so far (on `path` only, if given), oldest first.
sub requests {
    my ($self, $path) = @_;
    open my $fh, '<', $self->{log} or die $!;
    flock $fh, LOCK_SH;
    my @all;
    while (my $line = <$fh>) {
        my $e = eval { $codec->decode($line) } or next;
        push @all, $e if !defined $path || $e->{path} eq $path;
    }
    return @all;
}

sub wait_requests {
    my ($self, $path, $count, $timeout, $what) = @_;
    return wait_until(sub { $self->requests($path) >= $count }, $timeout // 30, $what // "$count requests on $path");
}

# The specification's verification: true when one of the v1 signatures of
# the headers is the HMAC of id.timestamp.body under the secret, and the
# timestamp is within `tolerance` seconds (300) of `now` (time).
sub verify {
    my ($class, $secret, $headers, $body, %o) = @_;
    my ($id, $ts, $sigs) = @{$headers}{qw(webhook-id webhook-timestamp webhook-signature)};
    return 0 unless defined $id && defined $ts && defined $sigs && $ts =~ /^\d+$/;
    my $now = $o{now} // time;
    return 0 if abs($now - $ts) > ($o{tolerance} // 300);
    (my $b64 = $secret) =~ s/^whsec_// or return 0;
    my $key = decode_base64($b64);
    my $expected = encode_base64(hmac_sha256("$id.$ts.$body", $key), '');
    for my $sig (split / /, $sigs) {
        my ($version, $value) = split /,/, $sig, 2;
        return 1 if $version eq 'v1' && defined $value && $value eq $expected;
    }
    return 0;
}

sub stop {
    my $self = shift;
    local $?;    # reaped at exit: the test's own status stands
    my $pid = delete $self->{pid} or return;
    kill 'KILL', $pid;
    waitpid $pid, 0;
}

sub DESTROY { $_[0]->stop }

1;
