//! smarm: Erlang-style actors on stackful green threads.
