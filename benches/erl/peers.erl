%% The BEAM's side of smarm's core benches: the same workloads, timed by
%% Erlang itself. Run by benches/benches/beam.rs, which passes the sizes
%% and reads back one `result <id> <value>` line per figure.
%%
%% A timing is the median of `Rounds` rounds, in nanoseconds per round
%% (criterion's unit for the Rust side: one iteration is one round); a
%% memory figure is bytes per parked process.
-module(peers).
-export([main/2]).

%% `Figures` is a list of `{Id, Bench, Args}`; each figure runs in a fresh
%% process so that no mail or garbage is carried from one to the next.
main(Rounds, Figures) ->
    try
        lists:foreach(
            fun({Id, Bench, Args}) ->
                Value = isolated(fun() -> figure(Bench, Args, Rounds) end),
                io:format("result ~s ~p~n", [Id, Value])
            end,
            Figures),
        halt(0)
    catch
        Class:Reason:Stack ->
            io:format(standard_error, "~p:~p~n~p~n", [Class, Reason, Stack]),
            halt(1)
    end.

isolated(Fun) ->
    {Pid, Ref} = spawn_monitor(fun() -> exit({value, Fun()}) end),
    receive
        {'DOWN', Ref, process, Pid, {value, Value}} -> Value;
        {'DOWN', Ref, process, Pid, Reason} -> error(Reason)
    end.

figure(memory, [Count], _Rounds) -> parked_bytes(Count);
figure(Bench, Args, Rounds) -> median([round_of(Bench, Args) || _ <- lists:seq(1, Rounds)]).

round_of(Bench, Args) ->
    isolated(fun() ->
        Start = erlang:monotonic_time(nanosecond),
        run(Bench, Args),
        erlang:monotonic_time(nanosecond) - Start
    end).

median(Values) ->
    lists:nth((length(Values) + 1) div 2, lists:sort(Values)).

%% Two processes, each calling erlang:yield/0 `PerProcess` times.
run(yield, [PerProcess]) ->
    Yielder = fun() -> yield_times(PerProcess) end,
    wait_all([spawn_monitor(Yielder), spawn_monitor(Yielder)]);
%% Spawn `Count` processes (each exits at once), then wait for each one's
%% 'DOWN': spawn + join.
run(spawn_join, [Count]) ->
    wait_all([spawn_monitor(fun() -> ok end) || _ <- lists:seq(1, Count)]);
%% `Trips` round trips between the caller and an echo process. With
%% `bound`, the two are bound to schedulers 1 and 2.
run(ping_pong, [Trips, Placement]) ->
    Options = fun(Scheduler) ->
        case Placement of
            bound -> [monitor, {scheduler, Scheduler}];
            free -> [monitor]
        end
    end,
    Parent = self(),
    {Pinger, Ref} = spawn_opt(fun() -> ping(Parent, Trips) end, Options(1)),
    receive {ready, Pinger} -> ok end,
    {Ponger, _} = spawn_opt(fun echo/0, Options(2)),
    Pinger ! {go, Ponger},
    receive {'DOWN', Ref, process, Pinger, normal} -> Ponger ! stop end;
%% Skynet: a 10-ary tree of processes whose `Leaves` leaves report their
%% numbers; each parent sums its children's.
run(skynet, [Leaves]) ->
    skynet(0, Leaves, self()),
    Expected = Leaves * (Leaves - 1) div 2,
    receive {sum, Expected} -> ok; {sum, Other} -> error({skynet_sum, Other, Expected}) end.

yield_times(0) -> ok;
yield_times(N) -> erlang:yield(), yield_times(N - 1).

wait_all(Monitors) ->
    lists:foreach(
        fun({Pid, Ref}) -> receive {'DOWN', Ref, process, Pid, normal} -> ok end end,
        Monitors).

ping(Parent, Trips) ->
    Parent ! {ready, self()},
    receive {go, Ponger} -> ping_loop(Ponger, Trips) end.

ping_loop(_Ponger, 0) -> ok;
ping_loop(Ponger, N) ->
    Ponger ! {self(), N},
    receive N -> ping_loop(Ponger, N - 1) end.

echo() ->
    receive
        {From, N} -> From ! N, echo();
        stop -> ok
    end.

skynet(First, 1, Parent) ->
    Parent ! {sum, First};
skynet(First, Leaves, Parent) ->
    Share = Leaves div 10,
    Me = self(),
    [spawn(fun() -> skynet(First + Child * Share, Share, Me) end) || Child <- lists:seq(0, 9)],
    Parent ! {sum, collect(10, 0)}.

collect(0, Sum) -> Sum;
collect(N, Sum) -> receive {sum, Value} -> collect(N - 1, Sum + Value) end.

%% Bytes of resident memory per process parked in `receive`: the RSS delta
%% over `Count` processes, with erlang:memory(processes) beside it.
parked_bytes(Count) ->
    garbage_collect(),
    {Rss0, Heap0} = {rss(), erlang:memory(processes)},
    Parked = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, Count)],
    {Rss1, Heap1} = {rss(), erlang:memory(processes)},
    [Pid ! stop || Pid <- Parked],
    io:format("note memory ~b parked: RSS ~.1f bytes each, erlang:memory(processes) ~.1f bytes each~n",
              [Count, (Rss1 - Rss0) / Count, (Heap1 - Heap0) / Count]),
    (Rss1 - Rss0) / Count.

rss() ->
    {ok, Status} = file:read_file("/proc/self/status"),
    [Line] = [L || L <- binary:split(Status, <<"\n">>, [global]), binary:part(L, 0, min(6, byte_size(L))) =:= <<"VmRSS:">>],
    [_, Kb, <<"kB">>] = binary:split(Line, [<<" ">>, <<"\t">>], [global, trim_all]),
    binary_to_integer(Kb) * 1024.
