#!/usr/bin/env escript
%%! -hidden
%% The Erlang side of smarm-dist's cluster example: calls the smarm kv
%% gen_server, then hands the smarm watcher a process to monitor and ends
%% that process. Usage: cluster_client.escript SmarmNode Cookie
main([SmarmNode, Cookie]) ->
    Node = list_to_atom(SmarmNode),
    Me = list_to_atom("client" ++ os:getpid()),
    {ok, _} = net_kernel:start([Me, shortnames]),
    erlang:set_cookie(node(), list_to_atom(Cookie)),
    undefined = gen_server:call({kv, Node}, {put, <<"lang">>, <<"erlang">>}, 5000),
    <<"erlang">> = gen_server:call({kv, Node}, {get, <<"lang">>}, 5000),
    io:format("erlang: kv on ~s answered~n", [Node]),
    Victim = spawn(fun() -> receive stop -> exit(finished) end end),
    {watcher, Node} ! {self(), Victim},
    receive {watching, Victim} -> ok after 5000 -> halt(1) end,
    Victim ! stop,
    receive {seen, Reason} -> io:format("erlang: smarm saw ~p~n", [Reason])
    after 5000 -> halt(1)
    end.
