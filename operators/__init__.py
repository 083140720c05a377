from operators.pure import install

install()
