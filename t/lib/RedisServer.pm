package RedisServer;

# A real redis-server (Debian's) on a free loopback port, in the test's
# directory, with nothing saved to disk. stop() kills it; start() brings it
# back on the same port, as an operator's restart would.

use strict;
use warnings;

use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep time);
use KeyauthTest qw(wait_until);

sub new {
    my ($class, %o) = @_;
    my $self = bless { dir => $o{dir}, port => KeyauthTest::free_port(), owner => $$ }, $class;
    $self->start;
    return $self;
}

sub port { $_[0]{port} }
sub url  { "redis://127.0.0.1:$_[0]{port}" }

sub start {
    my $self = shift;
    for my $attempt (1 .. 5) {
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            open STDOUT, '>>', "$self->{dir}/logs/redis.log";
            open STDERR, '>&', \*STDOUT;
            exec 'redis-server', '--port', $self->{port}, '--bind', '127.0.0.1',
                 '--save', '', '--appendonly', 'no', '--dir', $self->{dir},
                 '--daemonize', 'no', '--protected-mode', 'yes'
                or POSIX::_exit(127);
        }
        $self->{pid} = $pid;
        return $self if wait_until(sub { $self->ping }, 30, "redis-server on port $self->{port}");
        $self->stop;
        $self->{port} = KeyauthTest::free_port();  # taken meanwhile: another
    }
    die "redis-server did not start";
}

sub stop {
    my $self = shift;
    return unless $self->{pid};
    kill 'KILL', $self->{pid};
    waitpid $self->{pid}, 0;
    delete $self->{pid};
}

# One command in RESP; the reply's first line.
sub command {
    my ($self, @args) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port}, Timeout => 5)
        or return undef;
    print $s join('', '*' . @args . "\r\n", map { '$' . length($_) . "\r\n$_\r\n" } @args);
    my $line = <$s>;
    close $s;
    return $line;
}

sub ping { (shift->command('PING') // '') =~ /^\+PONG/ }

sub DESTROY {
    my $self = shift;
    local $?;
    $self->stop if $self->{owner} == $$;
}

1;
