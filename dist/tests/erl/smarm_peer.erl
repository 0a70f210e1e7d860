%% The BEAM side of smarm-dist's tests: a control process that runs one
%% command at a time for the test and replies {control, Result}, an echo
%% process, and a small key-value gen_server.
-module(smarm_peer).
-behaviour(gen_server).
-export([start/0, echo/0, control/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

start() ->
    register(echo, spawn(fun echo/0)),
    register(control, spawn(fun control/0)),
    {ok, _} = gen_server:start({local, peer_kv}, ?MODULE, [], []),
    io:format("ready~n").

echo() ->
    receive
        {From, Msg} when is_pid(From) -> From ! {self(), Msg};
        _ -> ok
    end,
    echo().

control() ->
    receive
        {From, Command} when is_pid(From) -> From ! {control, run(From, Command)};
        _ -> ok
    end,
    control().

run(_, {ping, Node}) -> net_adm:ping(Node);
run(_, {call, Dest, Request}) -> catch gen_server:call(Dest, Request, 2000);
run(_, {send, Dest, Msg}) -> Dest ! Msg, ok;
run(_, victim) ->
    spawn(fun() -> receive {die, Reason} -> exit(Reason) end end);
run(_, {kill, Pid, Reason}) -> exit(Pid, Reason), ok;
run(From, {watch, Dest}) ->
    %% Monitors Dest and reports {down, Reason} to From.
    Self = self(),
    spawn(fun() ->
        Ref = erlang:monitor(process, Dest),
        Self ! {watching, self()},
        receive {'DOWN', Ref, process, _, Reason} -> From ! {down, Reason} end
    end),
    receive {watching, W} -> W end;
run(From, {link_to, Pid}) ->
    %% Links to Pid, traps exits and reports {exit, Reason} to From.
    Self = self(),
    spawn(fun() ->
        process_flag(trap_exit, true),
        link(Pid),
        Self ! {linked, self()},
        receive {'EXIT', Pid, Reason} -> From ! {exit, Reason} end
    end),
    receive {linked, L} -> L end;
run(From, {round_trips, Dest, N}) ->
    %% N round trips {self(), I} -> Dest -> back; microseconds in all.
    T0 = erlang:monotonic_time(microsecond),
    lists:foreach(fun(I) -> Dest ! {self(), I}, receive {_, I} -> ok end end, lists:seq(1, N)),
    _ = From,
    erlang:monotonic_time(microsecond) - T0;
run(_, {blast, Dest, N}) ->
    %% N one-way messages to Dest, then {self(), done}.
    T0 = erlang:monotonic_time(microsecond),
    lists:foreach(fun(I) -> Dest ! I end, lists:seq(1, N)),
    Dest ! {self(), done},
    receive {_, done} -> ok end,
    erlang:monotonic_time(microsecond) - T0;
run(_, Other) -> {unknown, Other}.

init([]) -> {ok, #{}}.
handle_call({put, K, V}, _From, S) -> {reply, ok, S#{K => V}};
handle_call({get, K}, _From, S) -> {reply, maps:get(K, S, undefined), S};
handle_call(crash, _From, _S) -> exit(crashed);
handle_call(_, _From, S) -> {reply, {error, unknown}, S}.
handle_cast(_, S) -> {noreply, S}.
handle_info(_, S) -> {noreply, S}.
