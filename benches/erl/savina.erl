%% The Savina suite on the BEAM. Run by benches/benches/savina/main.rs,
%% which passes each bench's sizes (benches/src/savina.rs) and reads back
%% one `result <bench> <nanoseconds>` line per bench: the median of
%% `Rounds` rounds. Every round checks its result; a wrong one crashes the
%% run, and erl exits with status 1.
-module(savina).
-export([main/2]).

main(Rounds, Benches) ->
    try
        lists:foreach(
            fun({Bench, Args}) ->
                Times = [isolated(fun() -> timed(Bench, Args) end) || _ <- lists:seq(1, Rounds)],
                io:format("result ~s ~p~n", [Bench, lists:nth((Rounds + 1) div 2, lists:sort(Times))])
            end,
            Benches),
        halt(0)
    catch
        Class:Reason:Stack ->
            io:format(standard_error, "~p:~p~n~p~n", [Class, Reason, Stack]),
            halt(1)
    end.

%% Runs `Fun` in a fresh process (no mail or garbage carried over).
isolated(Fun) ->
    {Pid, Ref} = spawn_monitor(fun() -> exit({value, Fun()}) end),
    receive
        {'DOWN', Ref, process, Pid, {value, Value}} -> Value;
        {'DOWN', Ref, process, Pid, Reason} -> error(Reason)
    end.

timed(Bench, Args) ->
    Start = erlang:monotonic_time(nanosecond),
    ok = run(Bench, Args),
    erlang:monotonic_time(nanosecond) - Start.

check(_Bench, Expected, Expected) -> ok;
check(Bench, Expected, Got) -> error({Bench, expected, Expected, got, Got}).

%% ------------------------------------------------------------- benches

%% The caller plays Savina's main: it sets up, injects work where Savina's
%% main does, and waits for the result; the actors proper are spawned.
run(ping_pong, [Pings]) ->
    Main = self(),
    Pong = spawn(fun pong/0),
    spawn(fun() -> Main ! {done, ping(Pong, Pings, 0)} end),
    receive {done, Got} -> Pong ! stop, check(ping_pong, Pings, Got) end;
run(counting, [Count]) ->
    Main = self(),
    Counter = spawn(fun() -> counter(0) end),
    spawn(fun() ->
        send_increments(Counter, Count),
        Counter ! {get, self()},
        receive {total, Total} -> Main ! {done, Total} end
    end),
    receive {done, Total} -> check(counting, Count, Total) end;
run(thread_ring, [Actors, Hops]) ->
    Main = self(),
    Ring = [spawn(fun() -> receive {next, Next} -> member(Next, Main, Hops) end end)
            || _ <- lists:seq(1, Actors)],
    [First | Rest] = Ring,
    lists:foreach(fun({Member, Next}) -> Member ! {next, Next} end, lists:zip(Ring, Rest ++ [First])),
    First ! {token, 0},
    receive {hops, Passed} -> check(thread_ring, Hops, Passed) end,
    [Member ! stop || Member <- Ring],
    ok;
run(fork_join_create, [Actors]) ->
    Main = self(),
    [spawn(fun() -> receive go -> computation(37.2), Main ! done end end) ! go
     || _ <- lists:seq(1, Actors)],
    check(fork_join_create, Actors, count_done(Actors, 0));
run(fork_join_throughput, [Actors, Messages]) ->
    Main = self(),
    Workers = [spawn(fun() -> throughput_worker(Main, Messages, 0) end) || _ <- lists:seq(1, Actors)],
    send_rounds(Workers, Messages),
    check(fork_join_throughput, Actors * Messages, sum_done(Actors, 0));
run(fib, [N, Expected]) ->
    Me = self(),
    spawn(fun() -> fib(N, Me) end),
    receive {fib, Value} -> check(fib, Expected, Value) end;
run(chameneos, [Count, Meetings]) ->
    Main = self(),
    Mall = spawn(fun() -> mall(Meetings, none, Main) end),
    [spawn(fun() -> chameneo(Mall, Main, colour(Index), 0) end) || Index <- lists:seq(0, Count - 1)],
    Total = sum_done(Count, 0),
    Mall ! stop,
    check(chameneos, 2 * Meetings, Total);
run(big, [Actors, Pings]) ->
    Main = self(),
    Pids = [spawn(fun() -> receive {peers, Peers} -> big(Index, Peers, Pings, Main) end end)
            || Index <- lists:seq(0, Actors - 1)],
    Peers = list_to_tuple(Pids),
    [Pid ! {peers, Peers} || Pid <- Pids],
    Pongs = sum_done(Actors, 0),
    [Pid ! stop || Pid <- Pids],
    check(big, Actors * Pings, Pongs).

%% ----------------------------------------------------------- processes

ping(_Pong, 0, Got) -> Got;
ping(Pong, Left, Got) ->
    Pong ! {ping, self()},
    receive pong -> ping(Pong, Left - 1, Got + 1) end.

pong() ->
    receive
        {ping, From} -> From ! pong, pong();
        stop -> ok
    end.

send_increments(_Counter, 0) -> ok;
send_increments(Counter, Left) -> Counter ! increment, send_increments(Counter, Left - 1).

counter(Total) ->
    receive
        increment -> counter(Total + 1);
        {get, From} -> From ! {total, Total}
    end.

member(Next, Main, Hops) ->
    receive
        {token, Hops} -> Main ! {hops, Hops}, member(Next, Main, Hops);
        {token, Passed} -> Next ! {token, Passed + 1}, member(Next, Main, Hops);
        stop -> ok
    end.

computation(Theta) ->
    Sine = math:sin(Theta),
    Sine * Sine.

count_done(0, Done) -> Done;
count_done(Left, Done) -> receive done -> count_done(Left - 1, Done + 1) end.

sum_done(0, Sum) -> Sum;
sum_done(Left, Sum) -> receive {done, Value} -> sum_done(Left - 1, Sum + Value) end.

throughput_worker(Main, 0, Done) -> Main ! {done, Done};
throughput_worker(Main, Left, Done) ->
    receive work -> computation(37.2), throughput_worker(Main, Left - 1, Done + 1) end.

send_rounds(_Workers, 0) -> ok;
send_rounds(Workers, Left) ->
    [Worker ! work || Worker <- Workers],
    send_rounds(Workers, Left - 1).

fib(N, Parent) when N =< 2 -> Parent ! {fib, 1};
fib(N, Parent) ->
    Me = self(),
    spawn(fun() -> fib(N - 1, Me) end),
    spawn(fun() -> fib(N - 2, Me) end),
    receive {fib, A} -> receive {fib, B} -> Parent ! {fib, A + B} end end.

colour(Index) -> element(Index rem 3 + 1, {red, yellow, blue}).

complement(Same, Same) -> Same;
complement(A, B) -> hd([red, yellow, blue] -- [A, B]).

%% The broker: pairs requests; when the meetings are done, tells each
%% chameneo that asks to stop.
mall(Left, Waiting, Main) ->
    receive
        {meet, From, _} when Left =:= 0 -> From ! stop, mall(0, Waiting, Main);
        {meet, From, Colour} when Waiting =:= none -> mall(Left, {From, Colour}, Main);
        {meet, From, Colour} ->
            {First, _} = Waiting,
            First ! {partner, From, Colour},
            mall(Left - 1, none, Main);
        stop -> ok
    end.

%% A chameneo asks the mall for a partner; the first of a pair hears of the
%% second from the mall and tells it the colour they both take.
chameneo(Mall, Main, Colour, Met) ->
    Mall ! {meet, self(), Colour},
    receive
        {partner, Other, OtherColour} ->
            New = complement(Colour, OtherColour),
            Other ! {change, New},
            chameneo(Mall, Main, New, Met + 1);
        {change, New} -> chameneo(Mall, Main, New, Met + 1);
        stop -> Main ! {done, Met}
    end.

big(Index, Peers, Pings, Main) ->
    big_ping(Peers, Pings, neighbours(Index, tuple_size(Peers)), Main, 0).

%% Sends one ping, then answers pings until its pong comes back.
big_ping(_Peers, 0, _Next, Main, Pongs) ->
    Main ! {done, Pongs},
    big_serve();
big_ping(Peers, Left, Next, Main, Pongs) ->
    {Target, Following} = next_neighbour(Next),
    element(Target + 1, Peers) ! {ping, self()},
    big_wait(),
    big_ping(Peers, Left - 1, Following, Main, Pongs + 1).

big_wait() ->
    receive
        {ping, From} -> From ! pong, big_wait();
        pong -> ok
    end.

big_serve() ->
    receive
        {ping, From} -> From ! pong, big_serve();
        stop -> ok
    end.

%% The xorshift stream of benches/src/savina.rs (`Neighbours`).
neighbours(Me, Actors) -> {Me, {16#9E3779B97F4A7C15 bxor (Me + 1), Actors}}.

next_neighbour({Me, {State0, Actors}}) ->
    Mask = 16#FFFFFFFFFFFFFFFF,
    State1 = State0 bxor ((State0 bsl 13) band Mask),
    State2 = State1 bxor (State1 bsr 7),
    State3 = State2 bxor ((State2 bsl 17) band Mask),
    Target = (Me + 1 + State3 rem (Actors - 1)) rem Actors,
    {Target, {Me, {State3, Actors}}}.
