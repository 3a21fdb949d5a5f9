# GitHub's secret scanning as the tests play it, on loopback only: an ECDSA
# P-256 key pair made here (openssl), its public key published in GitHub's
# JSON layout ({"public_keys": [{key_identifier, key, is_current}]}) in a
# file and by a small HTTP server that counts the times it is asked, and
# reports signed the way GitHub signs them (base64 of the DER ECDSA
# signature of the raw body, SHA-256).
package SecretScanner;

use strict;
use warnings;
use IO::Socket::INET;
use JSON::PP;
use POSIX ();

sub new {
    my ($class, %o) = @_;
    my $dir = $o{dir} or die 'dir';
    mkdir $dir;
    my $self = bless { dir => $dir, keys => [] }, $class;
    $self->add_key('current');
    $self->publish;
    return $self;
}

sub run {
    my $cmd = shift;
    system($cmd) == 0 or die "failed: $cmd";
}

# A new key pair, named $name; its identifier is 64 hex digits, as GitHub's.
sub add_key {
    my ($self, $name) = @_;
    my $pem = "$self->{dir}/$name.pem";
    run("openssl ecparam -name prime256v1 -genkey -noout -out '$pem' 2>/dev/null");
    run("openssl ec -in '$pem' -pubout -out '$pem.pub' 2>/dev/null");
    my $id = `openssl dgst -sha256 -r '$pem.pub'`;
    ($id) = $id =~ /^([0-9a-f]{64})/ or die 'identifier';
    $self->{pair}{$name} = { pem => $pem, id => $id, public => slurp("$pem.pub") };
    return $self->{pair}{$name};
}

# Writes the published list: the named pairs (default every pair made).
sub publish {
    my ($self, @names) = @_;
    @names = sort keys %{ $self->{pair} } unless @names;
    my @keys = map { { key_identifier => $self->{pair}{$_}{id}, key => $self->{pair}{$_}{public},
                       is_current => JSON::PP::true } } @names;
    my $tmp = "$self->{dir}/keys.json.tmp";
    open my $fh, '>', $tmp or die $!;
    print $fh JSON::PP->new->canonical->encode({ public_keys => \@keys });
    close $fh;
    rename $tmp, $self->keys_file or die $!;
}

sub keys_file { "$_[0]{dir}/keys.json" }
sub id { $_[0]{pair}{ $_[1] // 'current' }{id} }

sub slurp {
    my $f = shift;
    open my $fh, '<', $f or die "$f: $!";
    local $/;
    return scalar <$fh>;
}

# base64 of the signature of $body by pair $name (default 'current').
sub sign {
    my ($self, $body, $name) = @_;
    my $in = "$self->{dir}/body";
    open my $fh, '>', $in or die $!;
    print $fh $body;
    close $fh;
    my $sig = `openssl dgst -sha256 -sign '$self->{pair}{$name // 'current'}{pem}' '$in' | base64 -w0`;
    die 'sign' unless $? == 0 && length $sig;
    return $sig;
}

# The type a token matched, as registered with GitHub (docs/secret-scanning.md).
sub type_of {
    my $t = shift;
    return $t =~ /^kaa_/ ? 'keyauth_admin_token' : $t =~ /^kac_/ ? 'keyauth_console_token' : 'keyauth_api_key';
}

# The report body GitHub sends for these tokens.
sub report_body {
    my ($self, @tokens) = @_;
    return JSON::PP->new->canonical->encode(
        [map { { token => $_, type => type_of($_), url => "https://github.com/octo/app/blob/1a2b/.env",
                 source => 'content' } } @tokens]);
}

# The headers of a report signed by pair $name.
sub headers {
    my ($self, $body, $name) = @_;
    return ('Content-Type: application/json', 'Github-Public-Key-Identifier: ' . $self->id($name),
            'Github-Public-Key-Signature: ' . $self->sign($body, $name));
}

# Serves keys.json (read afresh each time) on a free loopback port until
# stop; each request adds a line to the count file.
sub serve {
    my $self = shift;
    my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, ReuseAddr => 1)
        or die "listen: $!";
    $self->{port} = $listen->sockport;
    my $count = "$self->{dir}/fetches";
    open my $c, '>', $count or die $!;
    close $c;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        # never hold the test's output open (prove waits for it to close),
        # and never outlive a test that died
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        alarm 1800;
        while (my $s = $listen->accept) {
            local $/ = "\r\n\r\n";
            my $head = <$s> // '';
            open my $fh, '>>', $count or POSIX::_exit(1);
            print $fh "x\n";
            close $fh;
            my $status = -e "$self->{dir}/down" ? '500 Internal Server Error' : '200 OK';
            my $body = -e "$self->{dir}/down" ? 'down' : slurp($self->keys_file);
            print $s "HTTP/1.1 $status\r\nContent-Type: application/json\r\nContent-Length: " . length($body) .
                     "\r\nConnection: close\r\n\r\n$body";
            close $s;
        }
        POSIX::_exit(0);
    }
    $self->{server} = $pid;
    return "http://127.0.0.1:$self->{port}/meta/public_keys/secret_scanning";
}

# How many times the server has been asked for the list.
sub fetches {
    my $self = shift;
    open my $fh, '<', "$self->{dir}/fetches" or return 0;
    my @l = <$fh>;
    return scalar @l;
}

# The server answers 500 (down 1) or the list again (down 0).
sub down {
    my ($self, $down) = @_;
    if ($down) { open my $fh, '>', "$self->{dir}/down" or die $!; close $fh }
    else { unlink "$self->{dir}/down" }
}

sub stop {
    my $self = shift;
    local $?;  # the server's end must not become the test's exit status
    return unless $self->{server};
    kill 'KILL', $self->{server};
    waitpid $self->{server}, 0;
    delete $self->{server};
}

sub DESTROY { $_[0]->stop }

1;
